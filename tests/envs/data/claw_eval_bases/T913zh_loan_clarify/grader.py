"""T913zh_loan_clarify grader — written for openforgerl's tests in the shape of upstream's C01-C38 graders:
the rubrics on the user-agent clarification base, nothing else."""

from claw_eval.graders.user_agent_clarify_base import UserAgentClarifyGraderBase


class LoanClarifyGrader(UserAgentClarifyGraderBase):
    DOMAIN = "房贷提前还款"
    MUST_ASK = ["当前利率", "剩余本金", "还款方式"]  # noqa: RUF012 (upstream's graders write it so)
    CLARIFICATION_RUBRIC = "CLARIFY: 助手是否追问了利率、剩余本金和还款方式？0-1 分。"
    FINAL_ANSWER_RUBRIC = "ANSWER: 助手是否基于用户给出的利率计算了节省的利息并给出建议？0-1 分。"
