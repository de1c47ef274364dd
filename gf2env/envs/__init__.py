"""The environments: ``GF2Recon-v1`` (single), its native vector env, and ``GF2ReconText-v1``
(prompt in, text out) with the tool turns it asks of whoever runs the model's code."""
