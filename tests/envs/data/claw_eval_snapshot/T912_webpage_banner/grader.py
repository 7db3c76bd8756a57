"""T912_webpage_banner grader — written for openforgerl's tests in the shape of an upstream Claw-Eval webpage
grader: class attributes on the dynamic-webpage base, which asks the vision
judge about the recorded frames."""

from claw_eval.graders.webpage_grader import DynamicWebpageGrader


class BannerGrader(DynamicWebpageGrader):
    VISUAL_RUBRIC = "A red banner with the word Sale across the top of the page."
    PHYSICS_RUBRIC = "The banner stays in place across the frames."
    REFERENCE_IMAGE_PATH = "fixtures/reference.png"
