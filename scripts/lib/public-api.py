#!/usr/bin/env python3
"""The public API of a crate, one item a line, sorted, from the rustdoc JSON the compiler wrote.

Usage: public-api.py CRATE.json > LISTING.txt

Every item reachable from the crate root through public modules and re-exports is listed with its
path as a user names it (re-exports under the name they are exported as): modules, structs with
their public fields, enums with their variants, unions, traits, functions and inherent methods with
their signatures, constants, statics, type aliases, macros, the trait implementations of each type
(auto traits and blanket implementations left out: they follow from the rest), and the attributes
that change what a user may do (`#[non_exhaustive]`, `#[must_use]`, `#[deprecated]`). Items hidden
with `#[doc(hidden)]` and items behind a feature not enabled are absent from the JSON, so absent
here: they are not the API.
"""
import json
import sys

d = json.load(open(sys.argv[1]))
index = d["index"]
paths = d["paths"]
lines = set()


def item(i):
    return index.get(str(i))


public = {}  # id -> the path a user names it by (the shortest one found)


def path_of(i, fallback):
    if i in public:
        return public[i]
    p = paths.get(str(i))
    return "::".join(p["path"]) if p else fallback


def generic_args(a):
    if not a:
        return ""
    if "angle_bracketed" in a:
        ab = a["angle_bracketed"]
        parts = []
        for x in ab["args"]:
            if "lifetime" in x:
                parts.append(x["lifetime"])
            elif "type" in x:
                parts.append(ty(x["type"]))
            elif "const" in x:
                parts.append(str(x["const"].get("expr", "_")))
            else:
                parts.append("_")
        for c in ab.get("constraints", []):
            b = c["binding"]
            if "equality" in b:
                eq = b["equality"]
                parts.append(f'{c["name"]} = {ty(eq["type"]) if "type" in eq else eq}')
            else:
                parts.append(f'{c["name"]}: {bounds(b["constraint"])}')
        return "<" + ", ".join(parts) + ">" if parts else ""
    if "parenthesized" in a:
        p = a["parenthesized"]
        out = "(" + ", ".join(ty(t) for t in p["inputs"]) + ")"
        return out + (" -> " + ty(p["output"]) if p.get("output") else "")
    return ""


def rpath(p):
    return path_of(p["id"], p["path"]) + generic_args(p.get("args"))


def bounds(bs):
    out = []
    for b in bs:
        if "trait_bound" in b:
            t = b["trait_bound"]
            m = {"maybe": "?", "maybe_const": "~const "}.get(t.get("modifier"), "")
            out.append(m + rpath(t["trait"]))
        elif "outlives" in b:
            out.append(b["outlives"])
        else:
            out.append("use<..>")
    return " + ".join(out)


def ty(t):
    if t is None:
        return "()"
    (k, v), = t.items()
    if k == "resolved_path":
        return rpath(v)
    if k == "dyn_trait":
        parts = [rpath(p["trait"]) for p in v["traits"]]
        if v.get("lifetime"):
            parts.append(v["lifetime"])
        return "dyn " + " + ".join(parts)
    if k in ("generic", "primitive"):
        return v
    if k == "function_pointer":
        s = v["sig"]
        return "fn(" + ", ".join(ty(x[1]) for x in s["inputs"]) + ")" + (
            " -> " + ty(s["output"]) if s.get("output") else "")
    if k == "tuple":
        return "(" + ", ".join(ty(x) for x in v) + ("," if len(v) == 1 else "") + ")"
    if k == "slice":
        return "[" + ty(v) + "]"
    if k == "array":
        return "[" + ty(v["type"]) + "; " + v["len"] + "]"
    if k == "impl_trait":
        return "impl " + bounds(v)
    if k == "infer":
        return "_"
    if k == "raw_pointer":
        return ("*mut " if v["is_mutable"] else "*const ") + ty(v["type"])
    if k == "borrowed_ref":
        lt = v["lifetime"] + " " if v.get("lifetime") else ""
        return "&" + lt + ("mut " if v["is_mutable"] else "") + ty(v["type"])
    if k == "qualified_path":
        tr = rpath(v["trait"]) if v.get("trait") else None
        base = f"<{ty(v['self_type'])} as {tr}>" if tr else ty(v["self_type"])
        return base + "::" + v["name"] + generic_args(v.get("args"))
    if k == "pat":
        return ty(v["type"])
    return k


def generics(g):
    ps = []
    for p in g["params"]:
        k = p["kind"]
        if "lifetime" in k:
            ps.append(p["name"])
        elif "type" in k:
            if k["type"].get("is_synthetic"):
                continue
            b = bounds(k["type"]["bounds"])
            ps.append(p["name"] + (": " + b if b else ""))
        elif "const" in k:
            ps.append("const " + p["name"] + ": " + ty(k["const"]["type"]))
    return "<" + ", ".join(ps) + ">" if ps else ""


def where(g):
    ws = []
    for w in g["where_predicates"]:
        if "bound_predicate" in w:
            b = w["bound_predicate"]
            ws.append(ty(b["type"]) + ": " + bounds(b["bounds"]))
    return " where " + ", ".join(ws) if ws else ""


def attrs(it):
    out = []
    for a in it.get("attrs", []):
        s = a if isinstance(a, str) else json.dumps(a)
        if isinstance(a, str) and not s.startswith("#"):
            s = "#[" + s + "]"
        if isinstance(a, dict):
            if "non_exhaustive" in a:
                s = "#[non_exhaustive]"
            elif "must_use" in a:
                s = "#[must_use]"
            elif "deprecated" in a:
                s = "#[deprecated]"
            else:
                continue
        elif not any(x in s for x in ("non_exhaustive", "must_use", "deprecated")):
            continue
        out.append(s + " ")
    if it.get("deprecation"):
        out.append("#[deprecated] ")
    return "".join(sorted(set(out)))


def fn_sig(name, f, self_ty=None):
    h = f["header"]
    q = ("const " if h["is_const"] else "") + ("async " if h["is_async"] else "") + (
        "unsafe " if h["is_unsafe"] else "")
    args = []
    for n, t in f["sig"]["inputs"]:
        if n == "self":
            s = ty(t)
            args.append({"Self": "self", "&Self": "&self", "&mut Self": "&mut self"}.get(s, "self: " + s))
        else:
            args.append(n + ": " + ty(t))
    out = f["sig"].get("output")
    return (f"{q}fn {name}{generics(f['generics'])}(" + ", ".join(args) + ")"
            + (" -> " + ty(out) if out else "") + where(f["generics"]))


def impls(path, ids):
    for i in ids:
        it = item(i)
        if not it:
            continue
        im = it["inner"]["impl"]
        if im.get("is_synthetic") or im.get("blanket_impl"):
            continue
        if im.get("trait"):
            neg = "!" if im.get("is_negative") else ""
            lines.add(f"impl{generics(im['generics'])} {neg}{rpath(im['trait'])} for {ty(im['for'])}"
                      + where(im["generics"]))
            continue
        for m in im["items"]:
            mi = item(m)
            if not mi or mi["visibility"] != "public":
                continue
            inner = mi["inner"]
            if "function" in inner:
                lines.add(f"{attrs(mi)}pub {fn_sig(path + '::' + mi['name'], inner['function'])}")
            elif "assoc_const" in inner:
                lines.add(f"pub const {path}::{mi['name']}: {ty(inner['assoc_const']['type'])}")
            elif "assoc_type" in inner:
                lines.add(f"pub type {path}::{mi['name']}")


seen = set()


def walk(i, path):
    it = item(i)
    if it is None or (i, path) in seen:
        return
    seen.add((i, path))
    if i not in public or len(path) < len(public[i]):
        public[i] = path
    inner = it["inner"]
    (kind, v), = inner.items()
    a = attrs(it)
    if kind == "module":
        lines.add(f"pub mod {path}")
        for c in v["items"]:
            ci = item(c)
            if ci is None or ci["visibility"] != "public":
                continue
            if "use" in ci["inner"]:
                u = ci["inner"]["use"]
                if u["id"] is None:
                    continue
                if u["is_glob"]:
                    target = item(u["id"])
                    if target is None:  # another crate's module: its listing has the items
                        lines.add(f"pub use {path}::{{{u['source']}::*}}")
                        continue
                    if target and "module" in target["inner"]:
                        for g in target["inner"]["module"]["items"]:
                            gi = item(g)
                            if gi and gi["visibility"] == "public" and gi.get("name"):
                                walk(g, path + "::" + gi["name"])
                    continue
                walk(u["id"], path + "::" + u["name"])
            elif ci.get("name"):
                walk(c, path + "::" + ci["name"])
    elif kind == "struct":
        g = v["generics"]
        lines.add(f"{a}pub struct {path}{generics(g)}{where(g)}")
        sk = v["kind"]
        if isinstance(sk, dict) and "plain" in sk:
            for f in sk["plain"]["fields"]:
                fi = item(f)
                if fi and fi["visibility"] == "public":
                    lines.add(f"pub {path}::{fi['name']}: {ty(fi['inner']['struct_field'])}")
        elif isinstance(sk, dict) and "tuple" in sk:
            for n, f in enumerate(sk["tuple"]):
                fi = item(f) if f is not None else None
                if fi and fi["visibility"] == "public":
                    lines.add(f"pub {path}::{n}: {ty(fi['inner']['struct_field'])}")
        impls(path, v["impls"])
    elif kind == "enum":
        g = v["generics"]
        lines.add(f"{a}pub enum {path}{generics(g)}{where(g)}")
        for var in v["variants"]:
            vi = item(var)
            vk = vi["inner"]["variant"]["kind"]
            vp = f"{path}::{vi['name']}"
            va = attrs(vi)
            if vk == "plain":
                lines.add(f"{va}pub {vp}")
            elif "tuple" in vk:
                fs = [ty(item(f)["inner"]["struct_field"]) for f in vk["tuple"] if f is not None]
                lines.add(f"{va}pub {vp}(" + ", ".join(fs) + ")")
            else:
                lines.add(f"{va}pub {vp}")
                for f in vk["struct"]["fields"]:
                    fi = item(f)
                    lines.add(f"pub {vp}::{fi['name']}: {ty(fi['inner']['struct_field'])}")
        impls(path, v["impls"])
    elif kind == "union":
        lines.add(f"{a}pub union {path}")
        impls(path, v["impls"])
    elif kind == "trait":
        lines.add(f"{a}pub trait {path}{generics(v['generics'])}"
                  + (": " + bounds(v["bounds"]) if v["bounds"] else ""))
        for m in v["items"]:
            mi = item(m)
            if mi and "function" in mi["inner"]:
                lines.add(f"{attrs(mi)}pub {fn_sig(path + '::' + mi['name'], mi['inner']['function'])}")
            elif mi:
                lines.add(f"pub {list(mi['inner'])[0]} {path}::{mi['name']}")
    elif kind == "function":
        lines.add(f"{a}pub {fn_sig(path, v)}")
    elif kind == "constant":
        lines.add(f"pub const {path}: {ty(v['type'])}")
    elif kind == "static":
        lines.add(f"pub static {path}: {ty(v['type'])}")
    elif kind == "type_alias":
        lines.add(f"pub type {path}{generics(v['generics'])} = {ty(v['type'])}")
    elif kind in ("macro", "proc_macro"):
        lines.add(f"pub macro {path}!")
    else:
        lines.add(f"pub {kind} {path}")


root = item(d["root"])
# Twice: the first walk learns each item's public path, the second writes lines that use them.
walk(d["root"], root["name"])
lines.clear()
seen.clear()
walk(d["root"], root["name"])
print("\n".join(sorted(lines)))
