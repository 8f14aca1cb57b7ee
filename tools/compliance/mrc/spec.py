# SPDX-License-Identifier: GPL-2.0
"""The requirements of Documentation/transport.rst, read from the document
itself, for the coverage report: every row of its normative tables (C1-C22,
D1-D9, with their level), every check of its validation order (H1-H16,
V0.1-V9), every drop reason, and every other sentence that says MUST or
SHOULD (numbered S1, S2, ... in document order, with its section).

A scenario names what it covers by id ("C7", "H11", "drop:bad_token") or, for
a sentence, by a phrase of it ("MUST read the IP ECN field"); resolve() finds
the one requirement a name means and fails on none or several, so a report
never silently loses a reference when the spec changes.
"""

import re


class Req:
    def __init__(self, rid, level, section, text):
        self.id, self.level, self.section, self.text = rid, level, section, " ".join(text.split())

    def __repr__(self):
        return f"{self.id} ({self.level}, {self.section}): {self.text[:80]}"


def _sections(lines):
    sec = [""] * len(lines)
    cur = ""
    for i, l in enumerate(lines):
        if (
            i + 1 < len(lines)
            and re.match(r"^([=\-~])\1{3,}\s*$", lines[i + 1])
            and l.strip()
            and not re.match(r"^[=\-~ ]+$", l)
        ):
            cur = l.strip()
        sec[i] = cur
    return sec


def parse(path):
    lines = open(path, encoding="utf-8").read().split("\n")
    sec = _sections(lines)
    SECTIONS.update(x for x in sec if x)
    reqs, seen = [], set()
    covered_lines = set()
    # list-table rows: "* - C7" then "- Value", "- MUST", "- Rule..."
    i = 0
    while i < len(lines):
        m = re.match(r"^\s*\* - ([CD]\d+)\s*$", lines[i])
        if m:
            rid = m.group(1)
            cells, j, cur = [], i + 1, None
            while j < len(lines) and not re.match(r"^\s*\* - ", lines[j]) and not re.match(r"^\S", lines[j]):
                c = re.match(r"^\s+- (.*)$", lines[j])
                if c:
                    if cur is not None:
                        cells.append(cur)
                    cur = c.group(1)
                elif cur is not None:
                    cur += " " + lines[j].strip()
                covered_lines.add(j)
                j += 1
            if cur is not None:
                cells.append(cur)
            covered_lines.add(i)
            if len(cells) >= 3 and rid not in seen:
                reqs.append(Req(rid, cells[1].strip(), sec[i], f"{cells[0]}: {' '.join(cells[2:])}"))
                seen.add(rid)
            i = j
            continue
        i += 1
    # Validation-order checks: **H1** ... / **V0.1** ...
    text = "\n".join(lines)
    vo = text[text.find("Validation order\n----") :]
    vo = vo[: vo.find("\nPer-connection state\n")]
    for m in re.finditer(r"\*\*([HV][0-9.]*\d)\*\*([^*]*)", vo):
        rid = m.group(1)
        if rid not in seen:
            reqs.append(Req(rid, "MUST", "Validation order", m.group(2).strip(" ;,.")))
            seen.add(rid)
    # Drop reasons: the first column of the "Drop reasons" table.
    dr = text[text.find("\nDrop reasons\n=====") :]
    dr = dr[: dr.find("\nValidation order\n")]
    rows = []
    for l in dr.split("\n"):
        m = re.match(r"^``([a-z_]+)``\s+(.*)$", l)
        if m:
            rows.append([m.group(1), m.group(2)])
        elif rows and l.startswith(" ") and l.strip() and not l.strip().startswith("="):
            rows[-1][1] += " " + l.strip()
        elif rows and (not l.strip() or l.startswith("=")):
            rows.append(None)
    for row in filter(None, rows):
        rid = "drop:" + row[0]
        if rid not in seen:
            reqs.append(Req(rid, "MUST", "Drop reasons", row[1]))
            seen.add(rid)
    # Simple tables (field formats): one requirement per row whose last
    # column says MUST or SHOULD, named by its field.
    n = 0
    rule = re.compile(r"^=+( +=+)+\s*$")
    i = 0
    while i < len(lines):
        if not rule.match(lines[i]):
            i += 1
            continue
        cols = [m.start() for m in re.finditer(r"=+", lines[i])]
        j = i + 1
        rows, rules = [], 1
        while j < len(lines) and rules < 3:
            l = lines[j]
            covered_lines.add(j)
            if rule.match(l):
                rules += 1
            elif rules == 2 and l.strip():
                if l[: cols[1]].strip() or (len(cols) > 2 and l[cols[1] : cols[-1]].strip()):
                    rows.append([l[cols[-2] : cols[-1]].strip(), l[cols[-1] :].strip()])
                elif rows:
                    rows[-1][1] += " " + l[cols[-1] :].strip()
            j += 1
        covered_lines.add(i)
        for field, meaning in rows:
            for s in re.split(r"(?<=[.;])\s+(?=[A-Z*(`])", meaning):
                lv = "MUST" if re.search(r"\bMUST\b", s) else ("SHOULD" if re.search(r"\bSHOULD\b", s) else None)
                if lv:
                    n += 1
                    reqs.append(Req(f"S{n}", lv, sec[i], f"{field}: {s}"))
        i = j
    # Other MUST / SHOULD sentences, paragraph by paragraph.
    para, psec = [], ""
    for i, l in enumerate(lines + [""]):
        if i in covered_lines:
            continue
        if l.strip() == "" or re.match(r"^[=\-~]{4,}", l.strip()):
            if para:
                body = " ".join(para)
                for s in re.split(r"(?<=[.;:])\s+(?=[A-Z*(])", body):
                    lv = "MUST" if re.search(r"\bMUST\b", s) else ("SHOULD" if re.search(r"\bSHOULD\b", s) else None)
                    if lv and not any(x in s for x in ("RFC 2119", "**MUST** (", "what a peer MUST do")):
                        n += 1
                        reqs.append(Req(f"S{n}", lv, psec, s))
                # A sentence that ends in a list ("It MUST NOT be able to"):
                # the list's items are part of it.
                if (
                    re.match(r"^\d+\. ", body)
                    and reqs
                    and reqs[-1].id.startswith("S")
                    and not re.search(r"[.;:)]$", reqs[-1].text)
                ):
                    reqs[-1].text += " " + body
            para = []
            continue
        if not para:
            psec = sec[i]
        para.append(l.strip())
    return reqs


SECTIONS = set()


def resolve(reqs, name):
    """The requirement a scenario's reference means (id or phrase), or for
    "\u00a7Title" the section of that title (a Req with level "section")."""
    if name.startswith("\u00a7"):
        if name[1:] in SECTIONS:
            return Req(name, "section", name[1:], "")
        raise KeyError(f"reference {name!r}: no such section in the spec")
    for r in reqs:
        if r.id == name:
            return r
    hits = [r for r in reqs if r.id.startswith("S") and name.lower() in r.text.lower()]
    if len(hits) == 1:
        return hits[0]
    raise KeyError(f"reference {name!r} matches {len(hits)} requirements of the spec")
