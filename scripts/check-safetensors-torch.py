#!/usr/bin/env python3
"""Check an `esopt export --format safetensors` of the tiny torch Llama fixture against PyTorch (a tool, not a test).

Builds the fixture's torch model as scripts/export-torch-llama.py does, loads DIR/model.safetensors into it by
name (strict: every parameter present, nothing extra; the tied head is the embedding only), decodes greedily with
torch's KV cache, and compares with the tokens esopt's engine decoded on the same θ_K (DIR/esopt-greedy.json,
written by scripts/export-greedy.ts). Prints a JSON report; exits 1 on any mismatch.

    /usr/bin/python3 scripts/check-safetensors-torch.py DIR test/fixtures/torch-llama-tied   # Debian python3-torch
"""
import importlib.util
import json
import os
import struct
import sys

import torch

DTYPES = {'F32': torch.float32, 'F16': torch.float16, 'BF16': torch.bfloat16}


def read_safetensors(path):
    """The format by hand (the `safetensors` package may be absent): 8-byte LE header length, JSON header, data."""
    with open(path, 'rb') as f:
        blob = f.read()
    (n,) = struct.unpack('<Q', blob[:8])
    header = json.loads(blob[8:8 + n])
    meta = header.pop('__metadata__', {})
    data = blob[8 + n:]
    tensors = {}
    for name, t in header.items():
        start, end = t['data_offsets']
        tensors[name] = torch.frombuffer(bytearray(data[start:end]), dtype=DTYPES[t['dtype']]).reshape(t['shape'])
    return meta, list(header.keys()), tensors


def main(out, fixture):
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location('export_torch_llama', os.path.join(here, 'export-torch-llama.py'))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)

    meta, keys, tensors = read_safetensors(os.path.join(out, 'model.safetensors'))
    config = json.load(open(os.path.join(out, 'config.json')))
    esopt = json.load(open(os.path.join(out, 'esopt-greedy.json')))
    original = json.load(open(os.path.join(fixture, 'greedy.json')))

    # θ_0: the fixture's weights, initialised as export-torch-llama.py does, to show how far θ_K moved
    torch.manual_seed(mod.SEED)
    model = mod.LlamaForCausalLM().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith('norm.weight'):
                p.copy_(1 + 0.1 * torch.randn_like(p))
            else:
                p.normal_(0, 0.5 if 'embed' in name else 0.3)
    theta_0 = {name: p.detach().clone() for name, p in model.named_parameters()}
    expected = {name: p.shape for name, p in model.named_parameters()}  # the shared head Parameter is listed once
    problems = []
    if keys != sorted(keys):
        problems.append('header keys are not sorted')
    if set(tensors) != set(expected):
        problems.append(f'names differ: missing {sorted(set(expected) - set(tensors))}, extra {sorted(set(tensors) - set(expected))}')
    for name, shape in expected.items():
        if name in tensors and tuple(tensors[name].shape) != tuple(shape):
            problems.append(f'{name}: shape {list(tensors[name].shape)}, torch {list(shape)}')
    if not problems:
        missing, unexpected = model.load_state_dict({k: v.float() for k, v in tensors.items()}, strict=False)
        tied_ok = config.get('tie_word_embeddings') is True and missing == ['lm_head.weight'] and model.lm_head.weight is model.model.embed_tokens.weight
        if unexpected or not tied_ok:
            problems.append(f'load_state_dict: missing {missing}, unexpected {unexpected}, tie_word_embeddings {config.get("tie_word_embeddings")}')
    moved = {name: float((tensors[name].float() - p).abs().max()) for name, p in theta_0.items() if name in tensors}
    runs = []
    tokens = lambda ids: ' '.join(map(str, ids))
    for run, before in zip(esopt['runs'], original['runs']):
        ids, gap = mod.greedy(model, run['prompt'])
        runs.append({'prompt': tokens(run['prompt']), 'torch': tokens(ids), 'esopt': tokens(run['greedy']), 'theta_0': tokens(before['greedy']), 'min_top2_gap': round(gap, 6)})
        if tokens(ids) != tokens(run['greedy']):
            problems.append(f'prompt {run["prompt"]}: torch {ids}, esopt {run["greedy"]}')
    report = {
        'torch': torch.__version__, 'export': out, 'fixture': fixture, 'metadata': meta, 'tensors': len(tensors),
        'dtypes': sorted({str(t.dtype) for t in tensors.values()}), 'run': esopt['run'], 'iteration': esopt['iteration'],
        'thetaHash': esopt['thetaHash'], 'mode': esopt['mode'],
        'max_abs_change_from_theta_0': {'largest': round(max(moved.values()), 6), 'smallest': round(min(moved.values()), 6), 'unchanged': sorted(k for k, v in moved.items() if v == 0)},
        'runs': runs,
        'differs_from_theta_0': any(r['torch'] != r['theta_0'] for r in runs),
        'problems': problems, 'ok': not problems,
    }
    print(json.dumps(report, indent=2))
    return 0 if not problems else 1


if __name__ == '__main__':
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
