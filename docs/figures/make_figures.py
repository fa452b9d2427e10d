"""Writes the documentation's figures into this folder (they are committed; run this after a change):

  thread-rows.svg  the CPU pool's row-ownership plan on a small example, computed with the rule of
                   kernels/cpu/scatter_cpu.cc (partition: destination bins cut into contiguous runs of
                   about n / threads updates, each thread walking its own updates in index order);
                   pure Python, byte-for-byte reproducible (st/test_site.py checks the committed file).
  call-paths.svg   graphviz's rendering of call-paths.dot (needs `dot`: apt-get install graphviz).

python docs/figures/make_figures.py [OUT_DIR]
"""
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# The example: 12 updates into 8 rows, 2 threads.
INDICES = (5, 1, 6, 3, 0, 7, 1, 4, 2, 6, 1, 5)
ROWS, THREADS = 8, 2
COLORS = ("#4c78a8", "#f58518", "#54a24b", "#b279a2")
LIGHT = ("#dbe6f3", "#fde3c8", "#d9efd6", "#efdfeb")


def owners(indices, rows, threads):
    """The owner thread of each row: partition()'s rule with one bin per row. Walking the bins in
    order, the next thread takes over once the updates so far (plus half of this bin's) pass its
    share (t + 1) * n / threads."""
    n = len(indices)
    counts = [indices.count(r) for r in range(rows)]
    owner, acc, t = [], 0, 0
    for total in counts:
        if t < threads - 1 and acc > 0 and acc + total // 2 > (t + 1) * n // threads:
            t += 1
        owner.append(t)
        acc += total
    return owner


def _text(x, y, s, size=13, anchor="start", weight="normal", fill="#222"):
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return (f'<text x="{x}" y="{y}" font-size="{size}" text-anchor="{anchor}" font-weight="{weight}" '
            f'fill="{fill}">{s}</text>')


def _cell(x, y, w, h, fill, label, stroke="#555", size=13, color="#fff"):
    return (f'<rect x="{x}" y="{y}" width="{w}" height="{h}" rx="3" fill="{fill}" stroke="{stroke}"/>'
            + _text(x + w / 2, y + h / 2 + size * 0.36, label, size, "middle", "bold", color))


def thread_rows_svg(indices=INDICES, rows=ROWS, threads=THREADS):
    owner = owners(list(indices), rows, threads)
    cw, ch, x0 = 38, 30, 180
    width = x0 + cw * len(indices) + 260
    out = []
    y = 34
    out.append(_text(20, y, f"Unsorted indices on {threads} threads: every destination row of input_x has one owner",
                     16, weight="bold"))
    y += 42
    out.append(_text(20, y + 20, "indices", 14, weight="bold"))
    out.append(_text(20, y + 38, "(index order)", 11, fill="#555"))
    for k, r in enumerate(indices):
        out.append(_text(x0 + k * cw + cw / 2 - 1, y - 6, str(k), 10, "middle", fill="#777"))
        out.append(_cell(x0 + k * cw + 2, y, cw - 4, ch, COLORS[owner[r]], str(r)))
    out.append(_text(x0 - 10, y - 6, "position", 10, "end", fill="#777"))
    # input_x rows, coloured by owner, on the right
    rx, ry, rh = x0 + cw * len(indices) + 70, y - 10, 26
    out.append(_text(rx + 30, ry - 8, "input_x rows", 13, "middle", "bold"))
    for r in range(rows):
        out.append(_cell(rx, ry + r * rh, 60, rh - 4, LIGHT[owner[r]], f"row {r}", stroke=COLORS[owner[r]],
                         size=12, color="#222"))
    for t in range(threads):
        mine = [r for r in range(rows) if owner[r] == t]
        n_t = sum(1 for i in indices if owner[i] == t)
        mid = ry + (mine[0] + mine[-1] + 1) / 2 * rh - 4
        out.append(_text(rx + 70, mid, f"thread {t}", 13, weight="bold", fill=COLORS[t]))
        out.append(_text(rx + 70, mid + 16, f"rows {mine[0]}-{mine[-1]}, {n_t} updates", 11, fill="#444"))
    # what each thread applies, in index order
    y += ch + 40
    for t in range(threads):
        mine = [k for k, r in enumerate(indices) if owner[r] == t]
        out.append(_text(20, y + 20, f"thread {t} applies", 13, weight="bold", fill=COLORS[t]))
        for j, k in enumerate(mine):
            out.append(_cell(x0 + j * cw + 2, y, cw - 4, ch, COLORS[t], str(indices[k])))
            out.append(_text(x0 + j * cw + cw / 2 - 1, y + ch + 12, f"p{k}", 10, "middle", fill="#777"))
        y += ch + 30
    y += 8
    notes = [
        "The destination offsets are cut into bins (64 per thread); the bins go, in order, to the threads in contiguous",
        "runs of about n / threads updates each, and every thread applies the updates of its own rows in index order.",
        "So each row sees its updates in index order at any thread count: the results are bit-identical.",
        "Sorted indices instead: contiguous runs of positions, each cut moved past equal destinations.",
        "(Only calls large enough to split use more than one thread: 4M elements updated, 1 MiB of input_x touched.)",
    ]
    for line in notes:
        out.append(_text(20, y, line, 12, fill="#333"))
        y += 18
    height = y + 6
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">'
            f'<rect width="{width}" height="{height}" fill="white"/>')
    return "\n".join([head] + out + ["</svg>"]) + "\n"


def render_call_paths(out_dir):
    dot = shutil.which("dot")
    if not dot:
        print("make_figures: graphviz's dot not found; call-paths.svg not rendered", file=sys.stderr)
        return False
    subprocess.run([dot, "-Tsvg", os.path.join(HERE, "call-paths.dot"), "-o",
                    os.path.join(out_dir, "call-paths.svg")], check=True)
    return True


def main(out_dir=HERE):
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "thread-rows.svg"), "w", encoding="utf-8") as f:
        f.write(thread_rows_svg())
    render_call_paths(out_dir)


if __name__ == "__main__":
    main(*sys.argv[1:])
