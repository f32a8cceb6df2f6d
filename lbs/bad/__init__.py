"""The Bayesian action decoder (Foerster et al., ICML 2019): its two-step matrix game in
lbs.bad.matrix_game."""
