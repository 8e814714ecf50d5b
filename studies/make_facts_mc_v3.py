"""Write the v3 study's forgetting suite: four-way multiple-choice items of everyday facts in
families the base model scores 0.4 to 0.85 on (issue 44: forgetting with room to move).

    python studies/make_facts_mc_v3.py --all      # studies/data/facts-mc-v3-candidates.jsonl: every family
    python studies/make_facts_mc_v3.py            # studies/data/facts-mc-v3.jsonl: the families in KEPT

The same bytes every time (seeded). The candidates are v1's six families
(studies/make_facts_mc.py, their word lists unchanged) and the seventeen below; the base-only pilot
(studies/pilot_v3.py, results/pilot-v3/pilot.md) scored the base on every candidate item and
KEPT lists the families whose base accuracy lies in [0.4, 0.85], the rule written before the
scores were read, so that the suite has room to fall and to rise.

Licence: the word lists below and the files they make were written for evalkit and are
dedicated to the public domain (CC0 1.0); no item is taken from a published benchmark. None is
about numbers or arithmetic (the training tasks). Each item is a cloze in lm-eval's format
("Question: ...\\nAnswer:"), its right choice and three distractors drawn (seeded) from the same
family's answers, in a seeded order; scored by log-likelihood (evalkit.forgetting.multiple_choice),
chance 0.25.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import make_facts_mc as v1

HERE = Path(__file__).parent
# the families the pilot kept (base accuracy in [0.4, 0.85]; results/pilot-v3/pilot.md): 268 items, short
# of the 600 issue 44 asks for (13 of the 23 families score outside the band, most of them above 0.85)
KEPT: tuple[str, ...] = ("body", "continent", "currency", "home", "kind", "material", "season", "sound", "synonym", "young")

PLURALS = [("mouse", "mice"), ("child", "children"), ("foot", "feet"), ("tooth", "teeth"), ("man", "men"),
           ("woman", "women"), ("goose", "geese"), ("person", "people"), ("leaf", "leaves"), ("knife", "knives"),
           ("wolf", "wolves"), ("life", "lives"), ("wife", "wives"), ("half", "halves"), ("loaf", "loaves"),
           ("calf", "calves"), ("shelf", "shelves"), ("thief", "thieves"), ("ox", "oxen"), ("cactus", "cacti"),
           ("box", "boxes"), ("bus", "buses"), ("church", "churches"), ("dish", "dishes"), ("baby", "babies"),
           ("city", "cities"), ("lady", "ladies"), ("story", "stories"), ("potato", "potatoes"),
           ("tomato", "tomatoes"), ("hero", "heroes"), ("fox", "foxes"), ("glass", "glasses"), ("watch", "watches"),
           ("party", "parties"), ("berry", "berries"), ("fly", "flies"), ("key", "keys"), ("toy", "toys"),
           ("day", "days")]
PAST = [("go", "went"), ("eat", "ate"), ("see", "saw"), ("take", "took"), ("give", "gave"), ("write", "wrote"),
        ("drink", "drank"), ("swim", "swam"), ("sing", "sang"), ("run", "ran"), ("come", "came"),
        ("begin", "began"), ("bring", "brought"), ("buy", "bought"), ("think", "thought"), ("teach", "taught"),
        ("catch", "caught"), ("fight", "fought"), ("fly", "flew"), ("grow", "grew"), ("know", "knew"),
        ("throw", "threw"), ("draw", "drew"), ("drive", "drove"), ("ride", "rode"), ("speak", "spoke"),
        ("break", "broke"), ("choose", "chose"), ("freeze", "froze"), ("steal", "stole"), ("wake", "woke"),
        ("sleep", "slept"), ("keep", "kept"), ("feel", "felt"), ("leave", "left"), ("meet", "met"),
        ("sit", "sat"), ("stand", "stood"), ("tell", "told"), ("sell", "sold")]
LANGUAGES = [("France", "French"), ("Germany", "German"), ("Italy", "Italian"), ("Spain", "Spanish"),
             ("Portugal", "Portuguese"), ("Brazil", "Portuguese"), ("Mexico", "Spanish"), ("Japan", "Japanese"),
             ("China", "Chinese"), ("Russia", "Russian"), ("Greece", "Greek"), ("Turkey", "Turkish"),
             ("Poland", "Polish"), ("Sweden", "Swedish"), ("Norway", "Norwegian"), ("Finland", "Finnish"),
             ("Denmark", "Danish"), ("the Netherlands", "Dutch"), ("Hungary", "Hungarian"), ("Korea", "Korean"),
             ("Vietnam", "Vietnamese"), ("Thailand", "Thai"), ("Israel", "Hebrew"), ("Egypt", "Arabic"),
             ("Saudi Arabia", "Arabic"), ("Iran", "Persian"), ("England", "English"), ("Australia", "English"),
             ("Argentina", "Spanish"), ("Ukraine", "Ukrainian")]
CONTINENTS = [("France", "Europe"), ("Germany", "Europe"), ("Italy", "Europe"), ("Spain", "Europe"),
              ("Poland", "Europe"), ("Norway", "Europe"), ("Greece", "Europe"), ("Ireland", "Europe"),
              ("Japan", "Asia"), ("China", "Asia"), ("India", "Asia"), ("Thailand", "Asia"), ("Vietnam", "Asia"),
              ("Korea", "Asia"), ("Indonesia", "Asia"), ("Pakistan", "Asia"), ("Kenya", "Africa"),
              ("Nigeria", "Africa"), ("Egypt", "Africa"), ("Ghana", "Africa"), ("Ethiopia", "Africa"),
              ("Morocco", "Africa"), ("South Africa", "Africa"), ("Tanzania", "Africa"), ("Brazil", "South America"),
              ("Argentina", "South America"), ("Peru", "South America"), ("Chile", "South America"),
              ("Colombia", "South America"), ("Venezuela", "South America"), ("Canada", "North America"),
              ("Mexico", "North America"), ("the United States", "North America"), ("Cuba", "North America"),
              ("Australia", "Oceania"), ("New Zealand", "Oceania"), ("Fiji", "Oceania"), ("Samoa", "Oceania")]
YOUNG = [("dog", "puppy"), ("cat", "kitten"), ("cow", "calf"), ("horse", "foal"), ("sheep", "lamb"),
         ("goat", "kid"), ("pig", "piglet"), ("duck", "duckling"), ("goose", "gosling"), ("swan", "cygnet"),
         ("frog", "tadpole"), ("bear", "cub"), ("lion", "cub"), ("deer", "fawn"), ("kangaroo", "joey"),
         ("owl", "owlet"), ("eagle", "eaglet"), ("hen", "chick"), ("butterfly", "caterpillar"), ("fish", "fry"),
         ("seal", "pup"), ("rabbit", "kit"), ("whale", "calf"), ("elephant", "calf"), ("fox", "kit")]
SOUNDS = [("cow", "moo"), ("dog", "bark"), ("cat", "meow"), ("duck", "quack"), ("sheep", "baa"),
          ("pig", "oink"), ("horse", "neigh"), ("lion", "roar"), ("snake", "hiss"), ("owl", "hoot"),
          ("bee", "buzz"), ("frog", "croak"), ("mouse", "squeak"), ("rooster", "crow"), ("wolf", "howl"),
          ("donkey", "bray"), ("bird", "chirp"), ("hen", "cluck"), ("turkey", "gobble"), ("goose", "honk"),
          ("dove", "coo"), ("crow", "caw"), ("elephant", "trumpet"), ("bear", "growl"), ("goat", "bleat")]
MATERIALS = [("a window", "glass"), ("a brick wall", "clay"), ("a wooden table", "wood"), ("a candle", "wax"),
             ("a tyre", "rubber"), ("a sweater", "wool"), ("a book", "paper"), ("a coin", "metal"),
             ("a bottle for wine", "glass"), ("a shoe", "leather"), ("a bed sheet", "cotton"),
             ("a plastic bag", "plastic"), ("a snowman", "snow"), ("a sandcastle", "sand"), ("an igloo", "ice"),
             ("a pencil lead", "graphite"), ("a nail", "steel"), ("a cardboard box", "cardboard"),
             ("a pearl necklace", "pearls"), ("a silk scarf", "silk"), ("a clay pot", "clay"), ("bread", "flour"),
             ("cheese", "milk"), ("butter", "cream"), ("wine", "grapes"), ("paper", "wood"), ("jam", "fruit"),
             ("a statue in a park", "stone"), ("a rope", "fibre"), ("a wedding ring", "gold")]
HOMES = [("bee", "hive"), ("bird", "nest"), ("dog", "kennel"), ("horse", "stable"), ("pig", "sty"),
         ("rabbit", "burrow"), ("spider", "web"), ("bear", "den"), ("lion", "den"), ("cow", "barn"),
         ("hen", "coop"), ("fish", "pond"), ("ant", "anthill"), ("bat", "cave"), ("fox", "den"),
         ("eagle", "eyrie"), ("beaver", "lodge"), ("mole", "burrow"), ("monk", "monastery"), ("king", "palace"),
         ("sailor", "ship"), ("prisoner", "prison"), ("Eskimo in a story", "igloo"), ("nun", "convent"),
         ("soldier", "barracks")]
WORKERS = [("flies a plane", "pilot"), ("cuts hair", "barber"), ("fixes teeth", "dentist"),
           ("treats sick animals", "vet"), ("bakes bread", "baker"), ("fixes pipes", "plumber"),
           ("grows crops", "farmer"), ("teaches children", "teacher"), ("puts out fires", "firefighter"),
           ("cooks in a restaurant", "chef"), ("catches fish", "fisherman"), ("writes books", "author"),
           ("paints pictures", "painter"), ("sells meat", "butcher"), ("designs buildings", "architect"),
           ("delivers letters", "postman"), ("defends people in court", "lawyer"), ("looks after the sick", "nurse"),
           ("builds with bricks", "bricklayer"), ("works with wood", "carpenter"), ("drives a taxi", "driver"),
           ("acts in films", "actor"), ("sings songs", "singer"), ("plays the piano", "pianist"),
           ("studies the stars", "astronomer"), ("guards a building", "guard"), ("serves food", "waiter"),
           ("repairs cars", "mechanic"), ("takes photographs", "photographer"), ("makes clothes", "tailor")]
CITIES = [("Paris", "France"), ("Lyon", "France"), ("Marseille", "France"), ("Munich", "Germany"),
          ("Hamburg", "Germany"), ("Frankfurt", "Germany"), ("Milan", "Italy"), ("Venice", "Italy"),
          ("Naples", "Italy"), ("Barcelona", "Spain"), ("Seville", "Spain"), ("Valencia", "Spain"),
          ("Osaka", "Japan"), ("Kyoto", "Japan"), ("Shanghai", "China"), ("Hong Kong", "China"),
          ("Mumbai", "India"), ("Chicago", "the United States"), ("Boston", "the United States"),
          ("Los Angeles", "the United States"), ("Toronto", "Canada"), ("Vancouver", "Canada"),
          ("Sydney", "Australia"), ("Melbourne", "Australia"), ("Rio de Janeiro", "Brazil"),
          ("Sao Paulo", "Brazil"), ("Manchester", "England"), ("Liverpool", "England"), ("Edinburgh", "Scotland"),
          ("Glasgow", "Scotland"), ("St Petersburg", "Russia"), ("Istanbul", "Turkey")]
CURRENCIES = [("Japan", "yen"), ("the United States", "dollar"), ("England", "pound"), ("Germany", "euro"),
              ("France", "euro"), ("Italy", "euro"), ("Spain", "euro"), ("China", "yuan"), ("India", "rupee"),
              ("Russia", "rouble"), ("Mexico", "peso"), ("Argentina", "peso"), ("Switzerland", "franc"),
              ("South Korea", "won"), ("Brazil", "real"), ("Canada", "dollar"), ("Australia", "dollar"),
              ("Sweden", "krona"), ("Poland", "zloty"), ("Turkey", "lira"), ("Israel", "shekel"),
              ("Thailand", "baht"), ("South Africa", "rand"), ("Nigeria", "naira"), ("Vietnam", "dong")]
COMPARATIVES = [("good", "better"), ("bad", "worse"), ("big", "bigger"), ("small", "smaller"), ("fast", "faster"),
                ("slow", "slower"), ("happy", "happier"), ("easy", "easier"), ("heavy", "heavier"),
                ("funny", "funnier"), ("far", "farther"), ("little", "less"), ("many", "more"), ("hot", "hotter"),
                ("thin", "thinner"), ("wet", "wetter"), ("old", "older"), ("young", "younger"), ("strong", "stronger"),
                ("long", "longer"), ("short", "shorter"), ("tall", "taller"), ("cold", "colder"), ("warm", "warmer"),
                ("bright", "brighter"), ("dark", "darker"), ("rich", "richer"), ("poor", "poorer"),
                ("late", "later"), ("early", "earlier")]
SYNONYMS = [("big", "large"), ("small", "little"), ("quick", "fast"), ("begin", "start"), ("end", "finish"),
            ("happy", "glad"), ("sad", "unhappy"), ("angry", "mad"), ("shut", "close"), ("buy", "purchase"),
            ("help", "assist"), ("talk", "speak"), ("look", "see"), ("rich", "wealthy"), ("afraid", "scared"),
            ("smart", "clever"), ("silly", "foolish"), ("tired", "sleepy"), ("pretty", "beautiful"),
            ("hard", "difficult"), ("easy", "simple"), ("shout", "yell"), ("gift", "present"), ("road", "street"),
            ("couch", "sofa"), ("jump", "leap"), ("cry", "weep"), ("sick", "ill"), ("mistake", "error"),
            ("answer", "reply")]
BODY = [("see", "eyes"), ("hear", "ears"), ("smell", "nose"), ("taste", "tongue"), ("walk", "legs"),
        ("think", "brain"), ("breathe", "lungs"), ("chew", "teeth"), ("hold a cup", "hand"), ("kick a ball", "foot"),
        ("pump blood", "heart"), ("bend the leg", "knee"), ("bend the arm", "elbow"), ("nod", "head"),
        ("clap", "hands"), ("wink", "eye"), ("whistle", "lips"), ("digest food", "stomach"),
        ("filter blood", "kidneys"), ("wear a ring", "finger")]
OPPOSITE_NOUNS = [("king", "queen"), ("brother", "sister"), ("father", "mother"), ("son", "daughter"),
                  ("uncle", "aunt"), ("husband", "wife"), ("boy", "girl"), ("man", "woman"), ("prince", "princess"),
                  ("nephew", "niece"), ("grandfather", "grandmother"), ("actor", "actress"), ("waiter", "waitress"),
                  ("bull", "cow"), ("rooster", "hen"), ("stallion", "mare"), ("lion", "lioness"), ("duke", "duchess"),
                  ("host", "hostess"), ("groom", "bride"), ("sunrise", "sunset"), ("question", "answer"),
                  ("friend", "enemy"), ("winner", "loser"), ("teacher", "student"), ("doctor", "patient"),
                  ("buyer", "seller"), ("floor", "ceiling"), ("entrance", "exit"), ("summer", "winter")]
SEASONS = [("the season after spring", "summer"), ("the season after summer", "autumn"),
           ("the season after autumn", "winter"), ("the season after winter", "spring"),
           ("the season with snow", "winter"), ("the season when leaves fall", "autumn"),
           ("the season when flowers bloom", "spring"), ("the hottest season", "summer"),
           ("the coldest season", "winter"), ("the season of harvest", "autumn")]
BEFORE = ([(f"the day before {v1.DAYS[i]}", v1.DAYS[i - 1], v1.DAYS) for i in range(7)]
          + [(f"the month before {v1.MONTHS[i]}", v1.MONTHS[i - 1], v1.MONTHS) for i in range(12)]
          + [(f"the letter before {v1.LETTERS[i]}", v1.LETTERS[i - 1], list(v1.LETTERS)) for i in range(1, 26)])


def _pairs(family: str, template: str, pairs: list, pool: list | None = None) -> list[tuple]:
    answers = sorted({b for _, b in pairs}) if pool is None else pool
    return [(family, template.format(a), b, answers) for a, b in pairs]


def candidates() -> list[tuple[str, str, str, list[str]]]:
    """(family, question, answer, that family's answers) for every candidate item: v1's 240 and these."""
    out = list(v1._items())
    out += _pairs("plural", "Question: What is the plural of \"{}\"?\nAnswer:", PLURALS)
    out += _pairs("past", "Question: What is the past tense of \"{}\"?\nAnswer:", PAST)
    out += _pairs("language", "Question: What language is spoken in {}?\nAnswer:", LANGUAGES)
    out += _pairs("continent", "Question: On which continent is {}?\nAnswer:", CONTINENTS)
    out += _pairs("young", "Question: What is a young {} called?\nAnswer: a", YOUNG)
    out += _pairs("sound", "Question: What sound does a {} make?\nAnswer: a", SOUNDS)
    out += _pairs("material", "Question: What is {} usually made of?\nAnswer:", MATERIALS)
    out += _pairs("home", "Question: Where does a {} live?\nAnswer: in a", HOMES)
    out += _pairs("worker", "Question: What do you call a person who {}?\nAnswer: a", WORKERS)
    out += _pairs("city", "Question: In which country is the city of {}?\nAnswer:", CITIES)
    out += _pairs("currency", "Question: What is the currency of {}?\nAnswer: the", CURRENCIES)
    out += _pairs("comparative", "Question: What is the comparative of \"{}\"?\nAnswer:", COMPARATIVES)
    out += _pairs("synonym", "Question: What word means the same as \"{}\"?\nAnswer:", SYNONYMS)
    out += _pairs("body", "Question: What part of the body do you use to {}?\nAnswer: the", BODY)
    out += _pairs("counterpart", "Question: What is the counterpart of \"{}\"?\nAnswer:", OPPOSITE_NOUNS)
    out += _pairs("season", "Question: What is {}?\nAnswer:", SEASONS)
    out += [("before", f"Question: What is {q}?\nAnswer:", a, pool) for q, a, pool in BEFORE]
    return out


def build(families: tuple[str, ...] | None = None) -> list[dict]:
    """The items (all candidates, or those of `families`), each with its seeded distractors;
    an item keeps the same id, choices and order whichever families are kept."""
    rng = random.Random(0)
    rows = []
    for i, (family, question, answer, pool) in enumerate(candidates()):
        distractors = rng.sample(sorted(set(pool) - {answer}), 3)
        choices = [answer, *distractors]
        rng.shuffle(choices)
        if families is None or family in families:
            rows.append({"id": f"{family}-{i:03d}", "question": question, "choices": choices,
                         "answer": choices.index(answer)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="every candidate family")
    args = parser.parse_args()
    if not args.all and not KEPT:
        parser.error("KEPT is empty: run the pilot first (studies/pilot_v3.py), or give --all")
    name = "facts-mc-v3-candidates.jsonl" if args.all else "facts-mc-v3.jsonl"
    rows = build(None if args.all else KEPT)
    path = HERE / "data" / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    print(f"{path}: {len(rows)} items")


if __name__ == "__main__":
    main()
