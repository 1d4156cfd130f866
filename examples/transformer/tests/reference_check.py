#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Recomputes the loss and every parameter gradient of reference_dump's tiny model with an
independent NumPy implementation (float64, written from the GPT-2 definition) and compares:
loss within 1e-5 relative, each gradient within 1e-4 of the largest gradient of its tensor
(the trainer computes in fp32). Usage: reference_check.py DUMP"""
import sys

import numpy as np


def read(path):
    raw = open(path, "rb").read()
    layers, C, NH, maxT, V, B, T = np.frombuffer(raw, np.int32, 7)
    off = 28
    names = ["ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb", "ln2w", "ln2b", "fcw", "fcb", "fcprojw",
             "fcprojb"]
    shapes = {"ln1w": (C,), "ln1b": (C,), "qkvw": (3 * C, C), "qkvb": (3 * C,), "attprojw": (C, C),
              "attprojb": (C,), "ln2w": (C,), "ln2b": (C,), "fcw": (4 * C, C), "fcb": (4 * C,),
              "fcprojw": (C, 4 * C), "fcprojb": (C,)}
    order = [("wte", (V, C)), ("wpe", (maxT, C))]
    for l in range(layers):
        order += [(f"{n}{l}", shapes[n]) for n in names]
    order += [("lnfw", (C,)), ("lnfb", (C,))]
    P = sum(int(np.prod(s)) for _, s in order)

    def tensors(flat):
        out, at = {}, 0
        for name, shape in order:
            n = int(np.prod(shape))
            out[name] = flat[at:at + n].reshape(shape).astype(np.float64)
            at += n
        return out

    params = np.frombuffer(raw, np.float32, P, off)
    off += 4 * P
    tokens = np.frombuffer(raw, np.int32, B * T, off).reshape(B, T)
    off += 4 * B * T
    targets = np.frombuffer(raw, np.int32, B * T, off).reshape(B, T)
    off += 4 * B * T
    loss = float(np.frombuffer(raw, np.float32, 1, off)[0])
    off += 4
    grads = np.frombuffer(raw, np.float32, P, off)
    return int(layers), int(NH), tensors(params), tokens, targets, loss, tensors(grads)


def layernorm(x, w, b):
    mean = x.mean(-1, keepdims=True)
    rstd = 1.0 / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + 1e-5)
    norm = (x - mean) * rstd
    return norm * w + b, (norm, rstd)


def layernorm_back(dout, w, cache):
    norm, rstd = cache
    dnorm = dout * w
    dx = (dnorm - dnorm.mean(-1, keepdims=True) - norm * (dnorm * norm).mean(-1, keepdims=True)) * rstd
    return dx, (dout * norm).sum((0, 1)), dout.sum((0, 1))


K = np.sqrt(2.0 / np.pi)


def gelu(x):
    return 0.5 * x * (1.0 + np.tanh(K * (x + 0.044715 * x ** 3)))


def gelu_back(x, dout):
    th = np.tanh(K * (x + 0.044715 * x ** 3))
    return dout * (0.5 * (1 + th) + 0.5 * x * (1 - th ** 2) * K * (1 + 3 * 0.044715 * x ** 2))


def run(layers, NH, p, tokens, targets):
    B, T = tokens.shape
    C = p["wte"].shape[1]
    hs = C // NH
    g = {k: np.zeros_like(v) for k, v in p.items()}
    mask = np.tril(np.ones((T, T), bool))
    x = p["wte"][tokens] + p["wpe"][:T]
    caches = []
    for l in range(layers):
        P = lambda n: p[f"{n}{l}"]
        ln1, c1 = layernorm(x, P("ln1w"), P("ln1b"))
        qkv = ln1 @ P("qkvw").T + P("qkvb")
        q, k, v = (qkv[..., i * C:(i + 1) * C].reshape(B, T, NH, hs).transpose(0, 2, 1, 3) for i in range(3))
        s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(hs)
        s = np.where(mask, s, -np.inf)
        att = np.exp(s - s.max(-1, keepdims=True))
        att /= att.sum(-1, keepdims=True)
        y = (att @ v).transpose(0, 2, 1, 3).reshape(B, T, C)
        x2 = x + y @ P("attprojw").T + P("attprojb")
        ln2, c2 = layernorm(x2, P("ln2w"), P("ln2b"))
        h = ln2 @ P("fcw").T + P("fcb")
        a = gelu(h)
        x3 = x2 + a @ P("fcprojw").T + P("fcprojb")
        caches.append((x, ln1, c1, q, k, v, att, y, x2, ln2, c2, h, a))
        x = x3
    lnf, cf = layernorm(x, p["lnfw"], p["lnfb"])
    logits = lnf @ p["wte"].T
    z = logits - logits.max(-1, keepdims=True)
    probs = np.exp(z) / np.exp(z).sum(-1, keepdims=True)
    loss = -np.log(np.take_along_axis(probs, targets[..., None], -1)).mean()

    dlogits = probs.copy()
    np.put_along_axis(dlogits, targets[..., None], np.take_along_axis(dlogits, targets[..., None], -1) - 1, -1)
    dlogits /= B * T
    g["wte"] += np.einsum("btv,btc->vc", dlogits, lnf)
    dlnf = dlogits @ p["wte"]
    dx, g["lnfw"], g["lnfb"] = layernorm_back(dlnf, p["lnfw"], cf)
    for l in reversed(range(layers)):
        P = lambda n: p[f"{n}{l}"]
        x0, ln1, c1, q, k, v, att, y, x2, ln2, c2, h, a = caches[l]
        g[f"fcprojw{l}"] = np.einsum("btc,bti->ci", dx, a)
        g[f"fcprojb{l}"] = dx.sum((0, 1))
        dh = gelu_back(h, dx @ P("fcprojw"))
        g[f"fcw{l}"] = np.einsum("bto,bti->oi", dh, ln2)
        g[f"fcb{l}"] = dh.sum((0, 1))
        dln2 = dh @ P("fcw")
        d2, g[f"ln2w{l}"], g[f"ln2b{l}"] = layernorm_back(dln2, P("ln2w"), c2)
        dx2 = dx + d2
        g[f"attprojw{l}"] = np.einsum("btc,bti->ci", dx2, y)
        g[f"attprojb{l}"] = dx2.sum((0, 1))
        dy = (dx2 @ P("attprojw")).reshape(B, T, NH, hs).transpose(0, 2, 1, 3)
        datt = dy @ v.transpose(0, 1, 3, 2)
        dv = att.transpose(0, 1, 3, 2) @ dy
        ds = att * (datt - (att * datt).sum(-1, keepdims=True)) / np.sqrt(hs)
        dq = ds @ k
        dk = ds.transpose(0, 1, 3, 2) @ q
        dqkv = np.concatenate([t.transpose(0, 2, 1, 3).reshape(B, T, C) for t in (dq, dk, dv)], -1)
        g[f"qkvw{l}"] = np.einsum("bto,bti->oi", dqkv, ln1)
        g[f"qkvb{l}"] = dqkv.sum((0, 1))
        d1, g[f"ln1w{l}"], g[f"ln1b{l}"] = layernorm_back(dqkv @ P("qkvw"), P("ln1w"), c1)
        dx = dx2 + d1
    np.add.at(g["wte"], tokens, dx)
    g["wpe"][:T] += dx.sum(0)
    return loss, g


def main():
    layers, NH, params, tokens, targets, loss, grads = read(sys.argv[1])
    ref_loss, ref = run(layers, NH, params, tokens, targets)
    ok = abs(loss - ref_loss) <= 1e-5 * abs(ref_loss)
    print(f"loss: trainer {loss:.7f}, NumPy {ref_loss:.7f}")
    worst = 0.0
    for name, r in ref.items():
        scale = max(np.abs(r).max(), 1e-12)
        err = np.abs(grads[name] - r).max() / scale
        worst = max(worst, err)
        if err > 1e-4:
            print(f"gradient of {name}: largest difference {err:.2e} of its largest value")
            ok = False
    print(f"gradients: largest difference {worst:.2e} of a tensor's largest value, over {len(ref)} tensors")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
