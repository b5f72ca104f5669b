"""specpim-cp: provably optimal hardware/dataflow co-design for speculative LLM inference on PIM."""

__version__ = "0.1.0"
