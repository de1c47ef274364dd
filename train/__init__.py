"""Training loops (TRL and stable-baselines3) that log γ_g by depth while they train."""
