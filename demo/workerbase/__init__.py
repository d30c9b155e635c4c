"""The worker base: the embedded model fine-tuned to act on plain requests and standing rules.

SmolLM2-135M-Instruct picks tools near chance and ignores `<standing_rules>`; production's worker
is an instruction-tuned model that follows both. `data` writes synthetic tool loops in invented
workspaces that share no workspace, tool or rule with the demo suite or the sandbox pack;
`build` trains a seeded LoRA on them and merges it into the checkpoint the engine serves.
Measured on the demo's decisions it is no better than the untuned model (README, "What it
measures"): what a CPU build within the set-up budget teaches a 135M model is the call format.
"""
