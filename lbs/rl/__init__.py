"""Blueprint training: replay, R2D2 + VDN maths, self-play actors (selfplay), the learner on Lightning Fabric
(learner), checkpoints and resume (checkpoints), and the loop that schedules them (trainer)."""
