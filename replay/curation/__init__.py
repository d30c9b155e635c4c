"""The slow loop's input (DESIGN §12): a training set curated from a corpus and the runs that proved its
corrections, every example with its provenance.

- `classes.py`: the closed sets curation speaks in: decision classes, mix classes, origins
- `curation_policy.py`: a curation policy (`configs/curation/*.toml`)
- `pool.py`: `curate pool`: what a corpus could give a training set
- `proofs.py`: replay-proven corrections and the lesson gate's kept rules, from run directories
- `repeats.py`: redundant repeats: a target that makes again a call its prompt holds the ok answer of
- `build.py`: `curate build`: the training set itself
- `dataset.py`: the files a curated set is: `train.jsonl`, `provenance.jsonl`, `manifest.json`
- `errors.py`: `CurationError`, curation's branch of the error tree
"""
