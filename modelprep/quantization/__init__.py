"""Quantised copies of a model folder: `checkpoint` (the folder's files, and which weights it holds), `int8`, `int4`
(calibrated by AutoRound) and `command` (`python -m modelprep.quantization`). The arrows run one way: the command
uses both formats, 4 bits use int8 (for an untied output head), both use `checkpoint`."""
