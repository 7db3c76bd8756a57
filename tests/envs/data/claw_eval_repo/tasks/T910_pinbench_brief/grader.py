"""T910_pinbench_brief grader — written for openforgerl's tests in the shape of an upstream Claw-Eval grader
on the Pinbench-adapted base (class attributes only)."""

from claw_eval.graders.pinbench_common import PinbenchAdaptedGrader


class BriefGrader(PinbenchAdaptedGrader):
    REQUIRED_KEYWORDS = ("revenue", "12%", "churn", "Lisbon")
    OPTIONAL_KEYWORDS = ("cloud",)
    REQUIRED_PATTERNS = (r"^[-*]\s",)
    FORBIDDEN_TOOLS = ("gmail_send_message",)
    MIN_FINAL_LENGTH = 80
