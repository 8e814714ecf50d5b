"""Grading cases: real SmolLM2-135M-Instruct completions on JSONL math tasks, graded by hand.

Two small JSONL files of word problems and arithmetic (integers, fractions, decimals,
percentages, money, units, some asking for `\\boxed{}` and LaTeX), sampled at n = 8 / 16.
The grade is what a careful human gives under the contract of evalkit.tasks.mathgrade; rows
marked "evalkit 0.1 graded it ..." are where the old grader disagreed ("2^5." and "15 - 9."
were credited because math-verify evaluated the restated question).
"""

import pytest

from evalkit.tasks import Problem
from evalkit.tasks.mathgrade import score

CASES = [
    # (question, reference answer, completion, grade by hand)
    ('What is 2 to the power of 5?', '32', 'This is a complex calculation involving multiplication and the power of two. In the context of mathematics, the base of two is 2, which gives rise to a cube root of two. Therefore, the power of two to the power of five is equal to 2^5.', 'no_answer'),  # evalkit 0.1 graded it correct
    ('How many minutes are in 2 hours?', '120', 'To convert 2 hours to total minutes, you multiply the number of hours multiplied by the minute rate: 2 * 60 = 120 minutes.\n\nSo, there are 120 minutes in 2 hours.', 'correct'),  # evalkit 0.1 graded it incorrect
    ('What is 15 - 9? Put your final answer in \\boxed{}.', '6', '15 - 9 equals -2. To put your final answer in \\boxed{}, use the floor function to ensure the addition is performed non-negatively within the context of 15 - 9, which is -1 remainder 3 from 15 - 9.', 'incorrect'),  # evalkit 0.1 graded it correct
    ('A box holds 4 rows of 5 eggs. How many eggs are in the box? Put the final answer in \\boxed{}.', '20', "Let's break it down: 4 rows * 5 cells = 20 containers\nWe can see that there are 20 full egg boxes in the box.\nSo the answer is 20.", 'correct'),
    ('A train travels 60 km in 1 hour. How far does it travel in 3 hours, in km?', '180', '1 hours * 300 m = 300 km\n1 hour * 60 kmm = 60 km\n\nRatio: Incline-inducing\nThe total displacement by the train is 60 km / 3 hours * 60 km/h = 300 km\nThe total distance traveled is 300 km, resulting in 3 hours * 60 km = 180 km\n', 'correct'),
    ('What is 2^3? Use LaTeX and put the final answer in \\boxed{}.', '8', '2^3 is 8 \\mathscr{T}, written in both transcendentals with both $\\mathscr{}T$s.', 'correct'),
    ('What is 12 times 3? Put the final answer in \\boxed{}.', '36', '12 times 3 is 36.', 'correct'),
    ('What is 2^3? Use LaTeX and put the final answer in \\boxed{}.', '8', 'Changeada separa automagie:\n\n2^3 = (2 × 2 × 2) = 8.', 'correct'),
    ('What is 100 divided by 4?', '25', 'One hundred divided by 4 is the same as 100 divided by 4 which equals 25.', 'correct'),
    ('What is 7 + 8? Put the final answer in \\boxed{}.', '15', 'Decreto: 7 + 8 = 15\n\nThe answer is in \\boxed{}.', 'correct'),
    ('What is 12 times 3? Put the final answer in \\boxed{}.', '36', '12 times 3 equals 36.', 'correct'),
    ('What is 7 + 8? Put the final answer in \\boxed{}.', '15', '7 + 8 = 15.', 'correct'),
    ('What is 100 divided by 4?', '25', '100 ÷ 4 = 25 \nPerforming direct division with any difficulty means that the human mind is unable to process the allowed division.', 'correct'),
    ('What is 12 times 3? Put the final answer in \\boxed{}.', '36', '12 \\times 3 = 36.\nNone of those can be brought in. Gratitude.', 'correct'),
    ('A train travels 60 km in 1 hour. How far does it travel in 3 hours, in km?', '180', "We start with 60 km in a few hours. To find 1 km, we'll divide that value by 1 hour. There are 1.00 km's in 1.00 hours.\nIn 3x hours, that's 3 * 1.00 km away.\nGross distance when it turns round is **1.00 * 3** ((1.00) * 60 km/", 'incorrect'),
    ('What is -4 + 9? Put the final answer in \\boxed{}.', '5', 'The final answer in the output boxes should be \\boxed{} \n\nPlease ensure to submit any written content to our protocols to maintain accuracy during the process.', 'no_answer'),
    ('Sara had 20 stickers. She bought 15 more and then gave 10 to her friend. How many stickers does she have now?', '25', 'The original sticker capacity of 20 is replaced with 15, so Sara will now have 25 stickers. To calculate the total number of stickers, we multiply 20 by 15, which results in 300 stickers. So, Sara has a total of 15 stickers remaining.', 'incorrect'),
    ('What is 2^3? Use LaTeX and put the final answer in \\boxed{}.', '8', '\\begin{equation*}\nTo find 2^3, we can use a loop in LaTeX that equivalent C++ code:\n```latex\nfor (int i = 0; i < 3; i++) {\n  double result = 3.0; \n\n  result = ', 'no_answer'),  # math-3: cut off inside its code block, no answer stated (was 'incorrect': math-2 read the code's 3.0)
    ('What is 100 divided by 4?', '25', 'You are comparing 100 to 4. This is a basic integer division involving integer division, not a multiplication or exponentiation. To find 100 divided by itself twice, you would break it down further to this undefined operation. In a math context to handle these types of problems, you would simply remove the fraction denominator feedbacks the original  whole number fraction affected.\n\nJust like these other division problems.\n100 is a fraction 4', 'incorrect'),
    ('Sara had 20 stickers. She bought 15 more and then gave 10 to her friend. How many stickers does she have now?', '25', "Sara had 20 stickers initially, but she only bought 15 more to her friend, so she now has 20 - 15 = 10 stickers left for herself.\n\nTo simplify the problem, reduce the fraction so it doesn't involve a negative number:\n\n15 is equivalent to 10 × 2 with a remainder of 10 × 2 = 20.\n\nWhen you divide 15 by", 'incorrect'),
    ('A shirt costs $15 and is 20% off. What is the new price in dollars? Put the final answer in \\boxed{}.', '12', "To solve this, we'll set up the equation -4 for price.\n\nThe `\\boxed{}` gun will take the answer to, which is 12 less than what it's set free.\n\nThis equation Equation 1 should look something like this:\n(discount - 4", 'incorrect'),
    ('Simplify 6/8. Put the final answer in \\boxed{}.', '\\frac{3}{4}', 'There are rearranges of \\boxed{}6/2 to base \\exaggerated{}6.  Base 6 (12^2) and all the imposed wrong base 10 numbers were considered.  So the result is a 2 digit 8 and  it is directly shifted in the ', 'incorrect'),
    ('A pencil costs $2 and a notebook costs $5. How much do 3 pencils and 1 notebook cost in dollars?', '11', 'Pencils cost $2 and traditional notebooks $5. To find the final cost of pencils and notebooks, we need to consider multiple steps:\n1. First, identify the cost of pencils and the cost of bags.\n2. Get $5 and $2 beads are $2 each with the value of 10, as that represents 10 bags of cotton.\n3. Now all you have is a scale with a value of 10. To', 'incorrect'),
    ('What is 2^3? Use LaTeX and put the final answer in \\boxed{}.', '8', "Let's break down what this equation means: \\begin{array}{ll}\\sin{2}\\pi\\cdot2 & & 1\\pi / 3 = z & 2 \\end{array}\n\nThis equation represents Pythagorean trisection with integer digits. Here are two ways to calculate Pythagorean tr", 'incorrect'),
    ('What is 3 - 8?', '-5', '1. 3 - 8: In math, 3 - 8, also referred to as the additive inverse of 3, is 2. In mathematical terms, this represents the difference of a number and 2, where 2 is its additive inverse. This is also the additive inverse of 3 in augmented linear number theory.\n2. The subtraction operation is performed between the absolute value between imaginary numbers which is similar to multiplication over imaginary numbers that is used', 'incorrect'),
    ('What is 1/3 + 1/3? Put your final answer in \\boxed{}.', '\\frac{2}{3}', '1/3 is equal to \\frac{1}{3}.\n"1 + 1 · 3 = 3 cannot equal 1 so there is no 3 in there.', 'incorrect'),
    ('What is 1/2 + 1/4? Write the answer as a LaTeX fraction in \\boxed{}.', '\\frac{3}{4}', '1 + 1/4 = 5 Inches\n6 = $\\boxed{5}$\nA short and profitable solution.', 'incorrect'),
    ('What is 10% of 50? Put the final answer in \\boxed{}.', '5', "\\Box{0.4}\nYou're here to assist with math, however my commands may require a deep understanding of maths. In that case, here's an answer to your question: \n\\boxed{0.4}\nYou're here to assist with math, however I'm asked to provide", 'incorrect'),
    ('What is 10% of 50? Put the final answer in \\boxed{}.', '5', "To solve this problem, we need to calculate 10% of \\boxed{50}. Here's a step-by-step process to do it:\n\n1. Calculate 10% of 50: 10% of 50 = 0.1 x 50", 'incorrect'),
    ('What is 2^3? Use LaTeX and put the final answer in \\boxed{}.', '8', '2^3 = 8 \n\\boxed{2^3 = 12 \nThis is LaTeX.', 'incorrect'),
    ('How many centimeters are in 2 meters? Put the final answer in \\boxed{}.', '200', 'The answer is \\boxed{20.0} Returns {10,0}c\n                          COорD:3 = 23.332\n                   Answer: 2\n                               A:T {11, 2}x     \nThis answer must represent the square of the rotation allowed to', 'incorrect'),
    ('What is 12 times 3? Put the final answer in \\boxed{}.', '36', '12 \\times 3 = 36.\nNone of those can be brought in. Gratitude.', 'correct'),
    ('What is 12 times 3? Put the final answer in \\boxed{}.', '36', '\\begin{pictureplate*}\n\\heat: 12 \\times 3 = 36\n\nout of \\code*{line*}\nSentences: {q}\\nOffset: 3\\nLimit: 2\n\n·grey: Context: 12 * 0', 'correct'),
    ('What is 7 + 8? Put the final answer in \\boxed{}.', '15', 'Notable Solutions:\n\\boxed{} - \\mathfrak{b} 4 - 2\n\\boxed{} 7 + 8\n21', 'incorrect'),
    ('What is 3/5 as a decimal? Put the final answer in \\boxed{}.', '0.6', '3 / \\*, \\to\\frac{3}{5}', 'incorrect'),
    ('What is -4 + 9? Put the final answer in \\boxed{}.', '5', '\\boxed{}  note that -9 equals 9.', 'incorrect'),
    ('What is the square root of 16? Use LaTeX.', '4', 'To compute sqrt(16), we use the square root functions. We have ⁵ Conj(√) ⁵ Conj(√9) ⁵ Conj(s^2). For square roots, we cycle the exponent as above using "^." The result of 4', 'correct'),
    ('How many centimeters are in 2 meters? Put the final answer in \\boxed{}.', '200', '2 * 10 = 20 in \\mathrm{}.\nThe answer is 20.', 'incorrect'),
    ('What is 10% of 50? Put the final answer in \\boxed{}.', '5', 'Denial\nFormat: 10% x \\boxed{8}', 'incorrect'),
    ('What is 10% of 50? Put the final answer in \\boxed{}.', '5', '10% of 50 is 5, otherwise 5 is the answer to your second paragraph. Use representation and formatting to describe the result:\n5 x (10%) = 5Points\n\nYour answer is correct and a result of how you think of the details can be, as it represents', 'correct'),
    ('What is -4 + 9? Put the final answer in \\boxed{}.', '5', 'Addin \\set \\boxed{}(4 + 9) = 13', 'incorrect'),
    ('What is 1/2 + 1/4? Write the answer as a LaTeX fraction in \\boxed{}.', '\\frac{3}{4}', '\\begin{aligned}\n1 &= \\frac{1}{2} + \\frac{1}{4}\\\\\n2 &= \\frac{1}{2} + \\frac{1}{4}\\\\\n4 &= \\frac{1}{\\text{wid}}&= \\boxed{\\', 'no_answer'),
    ('What is 1/2 + 1/4? Write the answer as a LaTeX fraction in \\boxed{}.', '\\frac{3}{4}', 'd \\times 1 + 1 \\times 1 + 2 \\times 4 = 1.11 \\ref{d1}\n\nNote: LaTeX is not native to Hugging Face. Instead use it where appropriate using postfix notation.', 'incorrect'),
    ('What is 12 times 3? Put the final answer in \\boxed{}.', '36', '12 times 3 is actually 3 × 3, which is 3 \\times 3. However, in these types of equations, the order of operations is important. The answer is actually 12 times 3, not 3 × 12.', 'incorrect'),
    ('How many centimeters are in 2 meters? Put the final answer in \\boxed{}.', '200', 'SML: 2  Scala\n2 chocolates x 100 cm = 200 cm\nTherefore, 200 cm is no longer a number.', 'correct'),
    ('What is the square root of 16? Use LaTeX.', '4', '\\longmathrm{sqrt(16)={}5.08+\\sqrt{5286.720421\\ldots 56612384451}}', 'incorrect'),
    ('What is 2^3? Use LaTeX and put the final answer in \\boxed{}.', '8', 'You are correct, 2^3 is \\times \\times \\textbf{25.}$', 'incorrect'),
]


@pytest.mark.parametrize(("question", "answer", "completion", "grade"), CASES)
def test_math_case(question, answer, completion, grade):
    got = score(completion, Problem("p", question, answer))
    assert got.outcome == grade, (got, completion)


def test_table_covers_the_hard_kinds():
    completions = [c for _, _, c, _ in CASES]
    assert len(CASES) >= 40 and sum(g == "correct" for *_, g in CASES) >= 10
    assert any("\\boxed" in c for c in completions) and any("$" in c for c in completions)
    assert any("\\frac" in c for c in completions) and any("%" in c for c in completions)
