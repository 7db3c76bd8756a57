"""T915_logo_image_qa grader — written for openforgerl's tests in the shape of upstream's image-QA graders."""

from claw_eval.graders.base import AbstractGrader
from claw_eval.graders.image_qa_oracle import ImageQAOracleMixin


class LogoImageQAGrader(ImageQAOracleMixin, AbstractGrader):
    pass
