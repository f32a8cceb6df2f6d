"""Blueprint training: replay, R2D2 + VDN maths, self-play actors and the trainer (Lightning Fabric)."""
