"""OfficeQA answer matching, as upstream's OfficeQA graders (T076-T085) call it (ours, written from the
documented behaviour of upstream's `officeqa_reward`, itself a port of databricks/officeqa's reward).

- `extract_final_answer(text)`: the stripped inside of the first `<FINAL_ANSWER>...</FINAL_ANSWER>`
  (any case, across lines), else the text itself; an empty text or empty tags raise ValueError.
- `score_answer(gt, pred, tolerance=0.05)`: 1.0 when `fuzzy_match_answer` accepts, else 0.0.
- `fuzzy_match_answer(gt, pred, tolerance)` → (accepted, why). Numbers are read with thousands
  separators dropped and U+2212 as a minus (`-?\\d+\\.?\\d*%?`, the percent sign dropped). Unit words
  (million, B, k...) never scale a number: "2,602" matches "2602 million". When both sides have numbers:
  - one number in gt: some number in pred within `tolerance` relative difference (0 only matches 0), and
    the texts agree (below); pred's years (integers 1900-2100) are skipped unless gt is a year or has
    words of its own;
  - several numbers in gt: every one of them so matched (pred's years skipped unless gt has a year);
  - the texts agree when gt has no words beyond numbers and unit words, or both have such words and one's
    words contain the other's.
  Otherwise (a side without numbers) the texts are compared: lower-cased, outer quotes and parenthesised
  parts removed, gt inside pred.
"""

from __future__ import annotations

import re

_FINAL = re.compile(r"<FINAL_ANSWER>\s*(.*?)\s*</FINAL_ANSWER>", re.DOTALL | re.IGNORECASE)
_THOUSANDS = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_NUMBER = re.compile(r"-?\d+\.?\d*%?")
_UNIT_WORDS = (
    "trillion",
    "trillions",
    "billion",
    "billions",
    "million",
    "millions",
    "thousand",
    "thousands",
    "hundred",
    "hundreds",
    "percent",
    "percentage",
)


def normalize_text(text: str) -> str:
    if not text:
        raise ValueError("Cannot normalize empty or None text")
    return text.replace("\u2212", "-")


def extract_final_answer(text: str) -> str:
    if not text:
        raise ValueError("Cannot extract from empty text")
    found = _FINAL.search(text)
    if found is None:
        return text
    if not found.group(1).strip():
        raise ValueError("FINAL_ANSWER tags are empty")
    return found.group(1).strip()


def _numbers(text: str) -> list[float]:
    if not text:
        raise ValueError("Cannot extract numbers from empty text")
    plain = _THOUSANDS.sub(lambda m: m.group().replace(",", ""), normalize_text(text))
    return [float(m.group().rstrip("%")) for m in _NUMBER.finditer(plain)]


def _is_year(x: float) -> bool:
    return 1900 <= x <= 2100 and x == int(x)


def _words(text: str) -> str:
    """The text without its numbers, commas, unit words and punctuation (lower case, spaces collapsed)."""
    out = _NUMBER.sub("", normalize_text(text).lower()).replace(",", "")
    for unit in _UNIT_WORDS:
        out = re.sub(rf"\b{unit}\b", "", out)
    return re.sub(r"\s+", " ", re.sub(r"[^\w\s]", " ", out)).strip()


def _texts_agree(gt: str, pred: str) -> bool:
    if not gt or not pred:
        return False
    gt_words, pred_words = _words(gt), _words(pred)
    if len(gt_words) < 2:
        return True  # gt is a bare number (with units): nothing to compare
    if len(pred_words) < 2:
        return False
    return gt_words in pred_words or pred_words in gt_words


def _close(want: float, got: float, tolerance: float) -> bool:
    return got == 0 if want == 0 else abs(want - got) / abs(want) <= tolerance


def fuzzy_match_answer(ground_truth: str, predicted: str, tolerance: float = 0.05) -> tuple[bool, str]:
    if not ground_truth:
        raise ValueError("Ground truth cannot be empty")
    if not predicted:
        raise ValueError("Predicted answer cannot be empty")
    if not 0 <= tolerance <= 1:
        raise ValueError(f"Tolerance must be between 0 and 1, got {tolerance}")
    want, got = _numbers(ground_truth), _numbers(predicted)
    if want and got:
        agree = _texts_agree(ground_truth, predicted)
        if len(want) > 1:
            keep_years = any(_is_year(w) for w in want)
            got = [g for g in got if keep_years or not _is_year(g)]
            missing = [w for w in want if not (agree and any(_close(w, g, tolerance) for g in got))]
            return (
                not missing,
                f"list: {len(want) - len(missing)}/{len(want)} numbers found, missing {missing}",
            )
        (only,) = want
        if not (_is_year(only) or len(_words(ground_truth)) >= 2):
            got = [g for g in got if not _is_year(g)]
        hit = agree and any(_close(only, g, tolerance) for g in got)
        return hit, f"number: gt={only}, candidates={got[:5]}, texts agree={agree}"
    gt_text, pred_text = (
        re.sub(r"\([^)]*\)", "", s.strip().lower().strip('"').strip("'")).strip()
        for s in (ground_truth, predicted)
    )
    return gt_text in pred_text, f"text: {ground_truth[:100]!r} in {predicted[:100]!r}"


def score_answer(ground_truth: str, predicted: str, tolerance: float = 0.05) -> float:
    return 1.0 if fuzzy_match_answer(ground_truth, predicted, tolerance)[0] else 0.0
