"""Write `studies/data/facts-mc.jsonl`: 240 four-way multiple-choice items of everyday facts,
for forgetting above the floor (evalkit forgetting --mc-file facts=studies/data/facts-mc.jsonl).

    python studies/make_facts_mc.py          # rewrites the file; the same bytes every time

Licence: the word lists below and the file they make were written for evalkit and are
dedicated to the public domain (CC0 1.0); no item is taken from a published benchmark.

Six families of 40 items, none about arithmetic (the training task): antonyms, capitals,
what kind of thing an animal is, colours of things, the next day / month / letter, and
opposites of verbs. Each item is a cloze in lm-eval's format ("Question: ...\\nAnswer:"), its
right choice and three distractors drawn (seeded) from the same family's answers, in a seeded
order. Scored by log-likelihood (evalkit.forgetting.multiple_choice); chance is 0.25.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

ANTONYMS = [("hot", "cold"), ("big", "small"), ("tall", "short"), ("fast", "slow"), ("happy", "sad"),
            ("light", "dark"), ("old", "young"), ("rich", "poor"), ("hard", "soft"), ("wet", "dry"),
            ("full", "empty"), ("early", "late"), ("loud", "quiet"), ("strong", "weak"), ("thick", "thin"),
            ("clean", "dirty"), ("open", "closed"), ("heavy", "light"), ("high", "low"), ("near", "far"),
            ("long", "short"), ("true", "false"), ("good", "bad"), ("first", "last"), ("inside", "outside"),
            ("up", "down"), ("left", "right"), ("day", "night"), ("north", "south"), ("east", "west"),
            ("win", "lose"), ("buy", "sell"), ("push", "pull"), ("give", "take"), ("begin", "end"),
            ("love", "hate"), ("alive", "dead"), ("sweet", "sour"), ("safe", "dangerous"), ("cheap", "expensive")]
CAPITALS = [("France", "Paris"), ("Italy", "Rome"), ("Spain", "Madrid"), ("Germany", "Berlin"),
            ("Japan", "Tokyo"), ("China", "Beijing"), ("Russia", "Moscow"), ("Egypt", "Cairo"),
            ("England", "London"), ("Greece", "Athens"), ("Portugal", "Lisbon"), ("Ireland", "Dublin"),
            ("Austria", "Vienna"), ("Norway", "Oslo"), ("Sweden", "Stockholm"), ("Finland", "Helsinki"),
            ("Denmark", "Copenhagen"), ("Poland", "Warsaw"), ("Hungary", "Budapest"), ("Turkey", "Ankara"),
            ("India", "New Delhi"), ("Thailand", "Bangkok"), ("South Korea", "Seoul"), ("Kenya", "Nairobi"),
            ("Argentina", "Buenos Aires"), ("Peru", "Lima"), ("Chile", "Santiago"), ("Mexico", "Mexico City"),
            ("Canada", "Ottawa"), ("Australia", "Canberra"), ("Cuba", "Havana"), ("Belgium", "Brussels"),
            ("the Netherlands", "Amsterdam"), ("Switzerland", "Bern"), ("the Czech Republic", "Prague"),
            ("Iran", "Tehran"), ("Iraq", "Baghdad"), ("Indonesia", "Jakarta"), ("the Philippines", "Manila"),
            ("Vietnam", "Hanoi")]
KINDS = [("dog", "mammal"), ("cat", "mammal"), ("horse", "mammal"), ("cow", "mammal"), ("whale", "mammal"),
         ("lion", "mammal"), ("mouse", "mammal"), ("elephant", "mammal"), ("monkey", "mammal"),
         ("rabbit", "mammal"), ("eagle", "bird"), ("sparrow", "bird"), ("owl", "bird"), ("parrot", "bird"),
         ("penguin", "bird"), ("duck", "bird"), ("crow", "bird"), ("pigeon", "bird"), ("swan", "bird"),
         ("robin", "bird"), ("salmon", "fish"), ("trout", "fish"), ("shark", "fish"), ("tuna", "fish"),
         ("cod", "fish"), ("goldfish", "fish"), ("carp", "fish"), ("herring", "fish"), ("sardine", "fish"),
         ("catfish", "fish"), ("ant", "insect"), ("bee", "insect"), ("beetle", "insect"), ("fly", "insect"),
         ("butterfly", "insect"), ("mosquito", "insect"), ("wasp", "insect"), ("moth", "insect"),
         ("grasshopper", "insect"), ("ladybug", "insect")]
COLOURS = [("grass", "green"), ("the sky on a clear day", "blue"), ("snow", "white"), ("coal", "black"),
           ("a ripe banana", "yellow"), ("a ripe tomato", "red"), ("an orange", "orange"), ("milk", "white"),
           ("blood", "red"), ("a lemon", "yellow"), ("a leaf in summer", "green"), ("the sea", "blue"),
           ("a crow", "black"), ("chocolate", "brown"), ("a carrot", "orange"), ("a strawberry", "red"),
           ("the sun", "yellow"), ("a polar bear", "white"), ("a frog", "green"), ("soil", "brown"),
           ("ink in a pen", "blue"), ("a fire truck", "red"), ("a lime", "green"), ("a pumpkin", "orange"),
           ("tar", "black"), ("cream", "white"), ("a cherry", "red"), ("a canary", "yellow"),
           ("a pine tree", "green"), ("a tree trunk", "brown"), ("a sapphire", "blue"), ("an emerald", "green"),
           ("a ruby", "red"), ("a cloud", "white"), ("night", "black"), ("coffee", "brown"),
           ("a flamingo", "pink"), ("a pig", "pink"), ("a violet", "purple"), ("a plum", "purple")]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
VERBS = [("open", "close"), ("start", "stop"), ("arrive", "leave"), ("laugh", "cry"), ("sit", "stand"),
         ("remember", "forget"), ("accept", "refuse"), ("rise", "fall"), ("build", "destroy"),
         ("increase", "decrease"), ("enter", "exit"), ("float", "sink"), ("freeze", "melt"), ("lend", "borrow"),
         ("ask", "answer"), ("teach", "learn"), ("find", "lose"), ("come", "go"), ("wake", "sleep"),
         ("catch", "throw"), ("send", "receive"), ("attack", "defend"), ("add", "remove"), ("live", "die"),
         ("speak", "listen"), ("hide", "show"), ("fill", "empty"), ("lock", "unlock"), ("pass", "fail"),
         ("agree", "disagree"), ("appear", "vanish"), ("borrow", "return"), ("break", "fix"),
         ("enjoy", "hate"), ("save", "spend"), ("tie", "untie"), ("wrap", "unwrap"), ("whisper", "shout"),
         ("gather", "scatter"), ("praise", "blame")]


def _items() -> list[tuple[str, str, str, list[str]]]:
    """(family, question, answer, that family's answers) for all 240 items."""
    out = []
    out += [("antonym", f"Question: What is the opposite of \"{a}\"?\nAnswer:", b, [y for _, y in ANTONYMS])
            for a, b in ANTONYMS]
    out += [("capital", f"Question: What is the capital of {c}?\nAnswer:", city, [y for _, y in CAPITALS])
            for c, city in CAPITALS]
    kinds = ["mammal", "bird", "fish", "insect", "reptile", "tree", "vegetable", "stone"]
    out += [("kind", f"Question: What kind of animal is a {a}?\nAnswer: a", k, kinds) for a, k in KINDS]
    colours = sorted({c for _, c in COLOURS})
    out += [("colour", f"Question: What colour is {t}?\nAnswer:", c, colours) for t, c in COLOURS]
    nxt = [(f"the day after {DAYS[i]}", DAYS[(i + 1) % 7], DAYS) for i in range(7)]
    nxt += [(f"the month after {MONTHS[i]}", MONTHS[(i + 1) % 12], MONTHS) for i in range(12)]
    nxt += [(f"the letter after {LETTERS[i]}", LETTERS[i + 1], list(LETTERS)) for i in range(21)]
    out += [("next", f"Question: What is {q}?\nAnswer:", a, pool) for q, a, pool in nxt]
    out += [("verb", f"Question: What is the opposite of \"to {a}\"?\nAnswer: to", b, [y for _, y in VERBS])
            for a, b in VERBS]
    return out


def build() -> list[dict]:
    rng = random.Random(0)
    rows = []
    for i, (family, question, answer, pool) in enumerate(_items()):
        distractors = rng.sample(sorted(set(pool) - {answer}), 3)
        choices = [answer, *distractors]
        rng.shuffle(choices)
        rows.append({"id": f"{family}-{i:03d}", "question": question, "choices": choices,
                     "answer": choices.index(answer)})
    return rows


def main() -> None:
    path = Path(__file__).parent / "data" / "facts-mc.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in build()), encoding="utf-8")
    print(f"{path}: {len(build())} items")


if __name__ == "__main__":
    main()
