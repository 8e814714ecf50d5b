"""Grading cases: real SmolLM2-135M-Instruct completions on `arith`, each graded by hand.

In the style of Math-Verify's per-source case tables. Completions come from `make demo`
(prompt version 1), a 24 x 8 run with prompt version 2, and a temperature-1.6 run (special tokens
left in the text); the empty completion is the one row not sampled. The grade is what a careful
human gives under the contract of evalkit.tasks.mathgrade: the final answer the completion
commits to (an equation's result, else the last number that does not restate the question);
a restated question is never `correct`. Rows marked "evalkit 0.1 graded it ..." are where the
old grader (math-verify's permissive `parse`) disagreed; 16 of its 33 `correct` grades on the
demo were restated questions ("The final answer is 4 + 20 = 40.", "3 + 11 = ?").
"""

import pytest

from evalkit.tasks import Problem
from evalkit.tasks.mathgrade import score

PROMPTS = {1: "What is {}? Give the final answer as a number.", 2: "What is {}? Answer with just the number."}

CASES = [
    # (question's expression, prompt version, completion, grade by hand)
    ('2 + 9', 1, 'A fascinating question like this one! Note that 2 + 9 is an equation that requires solving (2 + 9) = 15. To begin with, equivalent equations might look like (2 + 9) = ', 'incorrect'),  # evalkit 0.1 graded it correct
    ('2 + 9', 1, "Sorry, I'm taking a detour to explain a math puzzle to an international translator. However, you can find google trivfact series available anywhere:230.ssdom7sunbehkjahjan to vb easy", 'incorrect'),  # evalkit 0.1 graded it no_answer
    ('2 + 9', 1, '2 + 9 is the remaining value in the pair of two unassigned digits.', 'no_answer'),  # evalkit 0.1 graded it correct
    ('17 + 16', 1, '0.17\n\nTo add 17 and 16, you need to calculate 17 + 16 from both ends.\n\nTaking the larger number (16) and adding it twice to both sides', 'incorrect'),  # evalkit 0.1 graded it correct
    ('13 + 10', 1, '13 + 10 is not given directly so it can only be determined with precision based on rounding.', 'no_answer'),  # evalkit 0.1 graded it correct
    ('19 + 7', 1, 'In any mathematical operation involving addition, the solution always gets an even number (19 + 7 is a multiple of 3), so 19 + 7 is a unique expression that can also be expressed as its equivalent fractions:', 'incorrect'),  # evalkit 0.1 graded it correct
    ('19 + 7', 1, 'To find the final answer, add 19 to 7:\n\n19 + 7 = 26', 'correct'),  # evalkit 0.1 graded it incorrect
    ('17 + 5', 1, 'Let\'s add it down. "17 + 5 equals 12. You are correct, adding 1 more makes 12 equal to 10. Thus, 17 + 5 is your final answer!"', 'incorrect'),  # evalkit 0.1 graded it correct
    ('10 + 5', 1, 'Url 10 + 5 is a mathematical operation.', 'no_answer'),  # evalkit 0.1 graded it correct
    ('4 + 20', 1, 'The final answer is 4 + 20 = 40.', 'incorrect'),  # evalkit 0.1 graded it correct
    ('20 + 5', 1, '"Cheo and 20 casting \nA sherhama sword \nIntroduced to zakiyeh kabishire\'s lan\nMentioning a very large warrior"\nSure, 20 + 5', 'incorrect'),  # evalkit 0.1 graded it correct
    ('10 + 4', 1, '10 + 4 is an interesting calculation involving a multiplicative operation with a fractional result.', 'no_answer'),  # evalkit 0.1 graded it correct
    ('3 + 11', 1, 'In mathematics, we have the function equation 3 + 11 = 14. To arrive at this equation, we can take a step backwards. We add 14, that is, 14 + 11', 'correct'),  # evalkit 0.1 graded it incorrect
    ('3 + 11', 1, '3 + 11 = ?', 'no_answer'),  # evalkit 0.1 graded it correct
    ('4 + 12', 1, 'At first, I couldn\'t provide an exact answer for "4 + 12," but after doing some research and using a physics textbook, I got it right. \n\nFermat\'s identity states that for any integer n, ', 'no_answer'),  # evalkit 0.1 graded it incorrect
    ('4 + 12', 1, '  4 + 12 = 16\n\nExcel 64browser. Well designed.', 'correct'),  # evalkit 0.1 graded it incorrect
    ('18 + 16', 1, "7 x 16 = 108mm\n\nThe answer is a good starting point but the calculation for 18 + 16 is 24, but 24 + 1 is irrelevant because you're", 'incorrect'),  # evalkit 0.1 graded it correct
    ('15 + 17', 1, 'To solve this problem, we should first combine the two 15s and 17s to get a final answer. We have both 15 + 17, but a 13 is left over from the possible', 'incorrect'),  # evalkit 0.1 graded it correct
    ('9 + 2', 1, 'A calculated thinking puzzle, unfortunately, also a cooking challenge. If you look at the equation, 9 + 2 = Acer. A picture. A picture of an ADHD. A girl in a wheelchair. A soccer goal.', 'no_answer'),  # evalkit 0.1 graded it correct
    ('1 + 20', 1, "1 + 20 = 21\n\n1 + 20 is not correct as it doesn't necessarily follow a Peano adiabatic process that relies a finite solution with a finite number of identikauts. ", 'correct'),  # evalkit 0.1 graded it incorrect
    ('16 + 11', 1, 'To solve this problem, we need to combine the numbers in the fixed-point addition of 11 with 11. This can be done by adding 11 to back the original numbers: 16 + 11', 'incorrect'),  # evalkit 0.1 graded it correct
    ('16 + 11', 1, "Let's begin by subtracting the original number from the answer: 16 + 11 = √1711 ..... 16 + 11 = √1711 = (√21", 'no_answer'),  # evalkit 0.1 graded it incorrect
    ('4 + 20', 1, '4 + 20 = 24', 'correct'),
    ('18 + 1', 2, '18 + 1 = 19', 'correct'),
    ('16 + 12', 2, '16 + 12 = 28', 'correct'),
    ('14 + 11', 1, '14 + 11 = 25 in this case, but we want 14 + 11 to represent the sum of a number with the same variable to represent another number having the same signed other variable.', 'correct'),
    ('16 + 12', 2, '16 + 12 = 28\n\nThis can be verified with a code like this:\ncomment = fillername\nfhnFactors = ".response_bootstrap-3x0+vjy4K', 'correct'),
    ('14 + 11', 2, '14 + 11 = 25\n\nI made that mistake last time, but I always follow the correct procedure when providing answers:\n\n- I remove the incorrect calculation (removing the denominator) from the total expression', 'correct'),
    ('4 + 12', 2, '-4 + 12 = 16', 'correct'),
    ('14 + 11', 1, '14 + 11 is 25.', 'correct'),
    ('16 + 12', 2, 'Think of 16 + 12 as a multiplication problem with a (1 + 1) = 2 multiplication happening. So add together this problem: 16 + 12 = 28.', 'correct'),
    ('3 + 11', 2, 'The answer to 3 + 11 is 14.', 'correct'),
    ('16 + 12', 2, 'To find 16 + 12 with just the number in it, without having to convert it from a digit. 16 + 12 = 28.', 'correct'),
    ('19 + 7', 2, '19 + 7 is 26.', 'correct'),
    ('13 + 10', 2, 'The phrase "13 + 10" is a clever use of numbers combining elements that add up to a specific value. It seems to be an example of that phrase "13 + 10= 23 in it', 'correct'),
    ('16 + 12', 2, "Here's how to calculate: 16 + 12 = 28, a total of 16 + 12 = 28.", 'correct'),
    ('20 + 7', 2, 'Elab(-a)+10=Edayabohh .10\n\nThis is just a mnemonic device by which one-fourth is a work around so ask anyone to explain how it is.', 'incorrect'),
    ('16 + 18', 2, 'Conciadejar eso: toma un cuño al imprimir 16 + 18; Samba furrowamos, no cuervas.', 'no_answer'),
    ('17 + 16', 1, 'A problem in mathematics, where absolute certainty is much more suited to mathematicians rather than descriptive invariants and representative rules.', 'no_answer'),
    ('9 + 2', 1, 'Number addition is a systematic process of combining numbers to obtain the total ordinary whole number.', 'no_answer'),
    ('4 + 20', 2, 'Two to the tenths (4.20)', 'incorrect'),
    ('17 + 16', 2, '`16 + 17 = 22`', 'incorrect'),
    ('19 + 7', 2, "That's a very logical and efficient solution. 19 + 7 = 9.", 'incorrect'),
    ('20 + 7', 1, 'To add 20 and 7, you need to create an equation using the given mental math exercises.\n\nWhen you add 20 and 7, you have to create an equation with both 20 and 1', 'incorrect'),
    ('13 + 10', 1, "It's 13 and you, 10.", 'incorrect'),
    ('15 + 17', 2, 'The answer is 20. To add 15 and 17 with just the number is 17 * 5 = 85 with the title "add "', 'incorrect'),
    ('20 + 7', 1, 'To add 20 + 7 with a placeholder, just keep adding the multiplier for the number that would save you (2). Multiply the result by 7 to get the adder.\n\nUsing a placeholder multiplication', 'incorrect'),
    ('18 + 1', 1, "When we see the equation 1 + 1, it's already familiar to many of you. What does that look like? Take a closer look. You see the numbers around it. Write an equation in the form of 1 +", 'incorrect'),
    ('1 + 20', 1, 'Regular one.ckeution map has singular ornament headachesariahtwohangaharie\n\n\n    Marion Chestermonialjoinedsession<|im_start|>system\n  convaloke lasting hide human technologies', 'no_answer'),  # special tokens left in the text (temperature 1.6)
    ('16 + 11', 1, 'ributesands Close &thenumbers #ukkahreddit<|im_start|>bear fragrant sess comprehension equal uniqueness polish fantastical parades renewal nonexistent guidelines alarming shakespeare survey Asia beyonded ###backupitives', 'no_answer'),  # special tokens left in the text (temperature 1.6)
    ('4 + 20', 2, '', 'no_answer'),  # empty output (constructed: the model never stopped at once)
]


@pytest.mark.parametrize(("expr", "version", "completion", "grade"), CASES)
def test_arith_case(expr, version, completion, grade):
    answer = str(sum(int(x) for x in expr.split(" + ")))
    got = score(completion, Problem("p", PROMPTS[version].format(expr), answer), "arith")
    assert got.outcome == grade, (got, completion)


def test_table_covers_the_hard_kinds():
    completions = [c for _, _, c, _ in CASES]
    assert len(CASES) >= 40
    assert sum(g == "correct" for *_, g in CASES) >= 10 and sum(g != "correct" for *_, g in CASES) >= 25
    assert any("<|im_start|>" in c for c in completions) and "" in completions
