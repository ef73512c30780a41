/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * heapbpf's flame graph viewer, written into every page heapbpf makes
 * (user/profile/flamegraph.c). The data is the tree heapbpf built: frames
 * [name, file, flags] and nodes in pre-order [frame, parent, bytes, objects,
 * line]; a diff's (data.diff) nodes carry the sample type's value in the base
 * and in the new profile in place of bytes and objects. This script lays the
 * tree out, draws the frames wider than MIN_PX as boxes, and draws again on
 * zoom, search, inversion and resize. Names reach the page only through
 * textContent and attributes, never as markup.
 */
(function () {
	'use strict';

	var ROW = 18; /* px per level; a box is a pixel less, for the gap */
	var MIN_PX = 0.5; /* narrower frames, and all above them, are not drawn */
	var PAD = 4; /* label padding each side, px (.f.t in the style) */
	var FONT = '12px "DejaVu Sans", Verdana, sans-serif'; /* .f's font */
	var INLINED = 1, PROCESS = 2, ROOT = 4;

	var data = JSON.parse(document.getElementById('hb-data').textContent);
	var DIFF = data.diff === true;
	var graph = document.getElementById('hb-graph');
	var details = document.getElementById('hb-details');
	var matchOut = document.getElementById('hb-match');
	var search = document.getElementById('hb-search');
	var invertBtn = document.getElementById('hb-invert');
	var resetBtn = document.getElementById('hb-reset');
	var frames = data.frames;
	var flame = flameTree(), callers = null;
	var inverted = false, zoom = 0, matched = null;
	var measure = document.createElement('canvas').getContext('2d');
	var HINT = 'Hover over a frame for details; click to zoom, Escape or the first frame to reset.';

	/* v0, v1: a node's bytes and objects; a diff's: its base and new value */
	function newTree() {
		return { frame: [], parent: [], depth: [], v0: [], v1: [], line: [], kids: [] };
	}

	function addNode(t, frame, parent, line) {
		var i = t.frame.length;

		t.frame.push(frame);
		t.parent.push(parent);
		t.depth.push(i ? t.depth[parent] + 1 : 0);
		t.v0.push(0);
		t.v1.push(0);
		t.line.push(line);
		t.kids.push([]);
		if (i)
			t.kids[parent].push(i);
		return i;
	}

	/* The tree as heapbpf wrote it: pre-order, so every parent comes before its children. */
	function flameTree() {
		var d = data.nodes, t = newTree();

		for (var k = 0; k < d.length; k += 5) {
			var i = addNode(t, d[k], d[k + 1], d[k + 4]);

			t.v0[i] = d[k + 2];
			t.v1[i] = d[k + 3];
		}
		if (DIFF)
			diffWidths(t);
		return t;
	}

	/*
	 * A diff's frame is as wide as the larger of its base and new values, so
	 * that what shrank shows as well as what grew; and as wide as its
	 * children together, which may be more (one child gone, another new):
	 * children in reverse pre-order come before their parent.
	 */
	function diffWidths(t) {
		var n = t.frame.length, kids = new Array(n).fill(0);

		t.w = new Array(n);
		for (var i = n - 1; i >= 0; i--) {
			t.w[i] = Math.max(t.v0[i], t.v1[i], kids[i], 0);
			if (i)
				kids[t.parent[i]] += t.w[i];
		}
	}

	function byName(t) {
		return function (a, b) {
			var x = frames[t.frame[a]], y = frames[t.frame[b]];

			if (x[0] !== y[0])
				return x[0] < y[0] ? -1 : 1;
			return (x[1] || '') < (y[1] || '') ? -1 : (x[1] || '') > (y[1] || '') ? 1 : 0;
		};
	}

	/*
	 * The inverted tree (callers): each frame's own value (what none of its
	 * children carries) climbs from that frame towards the root, so the
	 * first level holds the frames that allocated and above them their
	 * callers. Built level by level as it is drawn: a node keeps its
	 * members, [flame node, v0, v1] triples, and its children are
	 * those members' parents grouped by frame, made when the layout first
	 * asks for them (kids null until then).
	 */
	function callersTree() {
		var t = flame, inv = newTree(), members = [];

		inv.members = [];
		addNode(inv, t.frame[0], 0, 0);
		inv.v0[0] = t.v0[0];
		inv.v1[0] = t.v1[0];
		for (var i = 1; i < t.frame.length; i++) {
			var b = t.v0[i], o = t.v1[i];

			t.kids[i].forEach(function (c) {
				b -= t.v0[c];
				o -= t.v1[c];
			});
			if (b > 0 || o > 0)
				members.push(i, b, o);
		}
		inv.members[0] = members;
		inv.kids[0] = null;
		return inv;
	}

	/* The children of callers node n: its members one step nearer the root, by frame. */
	function expand(inv, n) {
		var m = inv.members[n], groups = new Map();

		inv.kids[n] = [];
		for (var x = 0; x < m.length; x += 3) {
			/* the leaf level starts at the members themselves, then their parents */
			var j = n === 0 ? m[x] : flame.parent[m[x]], g;

			if (j === 0)
				continue;
			g = groups.get(flame.frame[j]);
			if (!g) {
				g = { members: [], v0: 0, v1: 0, line: 0, best: -1 };
				groups.set(flame.frame[j], g);
			}
			g.members.push(j, m[x + 1], m[x + 2]);
			g.v0 += m[x + 1];
			g.v1 += m[x + 2];
			/* the line of the largest contribution, as heapbpf picks a frame's line */
			var weight = DIFF ? Math.max(m[x + 1], m[x + 2]) : m[x + 1 + data.size];

			if (weight > g.best) {
				g.best = weight;
				g.line = flame.line[j];
			}
		}
		groups.forEach(function (g, frame) {
			var k = addNode(inv, frame, n, g.line);

			inv.v0[k] = g.v0;
			inv.v1[k] = g.v1;
			inv.members[k] = g.members;
			inv.kids[k] = null;
		});
		inv.kids[n].sort(byName(inv));
		inv.members[n] = null;
	}

	function kidsOf(t, n) {
		if (t.kids[n] === null)
			expand(t, n);
		return t.kids[n];
	}

	function tree() {
		if (inverted && !callers)
			callers = callersTree();
		return inverted ? callers : flame;
	}

	/* How wide node n is drawn, in the tree's units; a diff's callers tree has no t.w. */
	function size(t, n) {
		if (DIFF)
			return t.w ? t.w[n] : Math.max(t.v0[n], t.v1[n], 0);
		return data.size ? t.v1[n] : t.v0[n];
	}

	function human(b) {
		var units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB', 'EiB'], u = 0;

		while (b >= 1024 && u < units.length - 1) {
			b /= 1024;
			u++;
		}
		return u ? b.toFixed(1) + ' ' + units[u] : b + ' B';
	}

	function count(v) {
		return Math.round(v).toLocaleString('en-US');
	}

	function share(part, whole) {
		return whole > 0 ? (100 * part / whole).toFixed(2) + '%' : '0%';
	}

	function sized(v) {
		return data.size ? count(v) + ' objects' : human(v);
	}

	/* A diff's value: "1.0 MiB (1,048,576 bytes)" or "1,234 objects"; signed: "+" when positive. */
	function amount(v, signed) {
		var sign = v < 0 ? '-' : signed && v > 0 ? '+' : '', m = Math.abs(v);

		return sign + (data.size ? count(m) + ' objects' : human(m) + ' (' + count(m) + ' bytes)');
	}

	/* "+64.0 MiB (67,108,864 bytes), +6400.0%": new against base, or "no change". */
	function change(b, n) {
		var d = n - b;

		if (d === 0)
			return 'no change';
		return amount(d, true) + (b > 0 ? ', ' + (d > 0 ? '+' : '') +
			(100 * d / b).toFixed(1) + '%' : '');
	}

	function diffText(b, n) {
		return 'base ' + amount(b) + ', new ' + amount(n) + ': ' + change(b, n);
	}

	/* What the details line says about node n of tree t. */
	function describe(t, n) {
		var f = frames[t.frame[n]], s = f[0];

		if (f[2] & INLINED)
			s += ' (inlined)';
		if (f[1])
			s += ' \u2014 ' + f[1] + (t.line[n] ? ':' + t.line[n] : '');
		if (DIFF)
			return s + ' \u2014 ' + data.kind + ' ' + diffText(t.v0[n], t.v1[n]);
		s += ' \u2014 ' + human(t.v0[n]) + ' ' + data.kind + ' (' + count(t.v0[n]) +
			' bytes), ' + count(t.v1[n]) + ' objects';
		s += ' \u2014 ' + share(size(t, n), size(t, 0)) + ' of total';
		if (zoom !== 0 && n !== zoom)
			s += ', ' + share(size(t, n), size(t, zoom)) + ' of ' + frames[t.frame[zoom]][0];
		return s;
	}

	/* FNV-1a of the name: a function keeps its colour wherever it shows. */
	function hash(s) {
		var h = 2166136261;

		for (var i = 0; i < s.length; i++)
			h = Math.imul(h ^ s.charCodeAt(i), 16777619) >>> 0;
		return h;
	}

	/*
	 * A diff's colour: red grew, blue shrank, the deeper the more of the
	 * larger value changed (gone or new: the deepest); grey unchanged.
	 */
	function diffColour(b, n) {
		var m = Math.max(b, n), r;

		if (b === n || !(m > 0))
			return 'hsl(0, 0%, 80%)';
		r = Math.min(Math.abs(n - b) / m, 1);
		return 'hsl(' + (n > b ? 0 : 218) + ', ' + (30 + 55 * r).toFixed(1) + '%, ' +
			(88 - 32 * r).toFixed(1) + '%)';
	}

	/* The memory palette: greens to teals by name; processes and the root in grey-blue. */
	function colour(t, n) {
		var f = frames[t.frame[n]], h = hash(f[0]);

		if (DIFF)
			return diffColour(t.v0[n], t.v1[n]);
		if (f[2] & ROOT)
			return 'hsl(210, 12%, 78%)';
		if (f[2] & PROCESS)
			return 'hsl(210, 25%, 70%)';
		return 'hsl(' + (95 + h % 90) + ', ' + (42 + (h >>> 8) % 22) + '%, ' +
			(50 + (h >>> 16) % 16) + '%)';
	}

	/* The longest label that fits room px: the name, or its start and an ellipsis, or nothing. */
	function fit(s, room, italic) {
		measure.font = (italic ? 'italic ' : '') + FONT;
		if (room < 12)
			return '';
		if (measure.measureText(s).width <= room)
			return s;
		var lo = 0, hi = s.length - 1;

		while (lo < hi) {
			var mid = (lo + hi + 1) >> 1;

			if (measure.measureText(s.slice(0, mid) + '\u2026').width <= room)
				lo = mid;
			else
				hi = mid - 1;
		}
		/* never cut a surrogate pair in half */
		if (lo > 0 && s.charCodeAt(lo - 1) >= 0xd800 && s.charCodeAt(lo - 1) < 0xdc00)
			lo--;
		return lo >= 2 ? s.slice(0, lo) + '\u2026' : '';
	}

	/*
	 * Which nodes show where: the zoomed node's ancestors full width (as
	 * context), the zoomed node and every descendant at least MIN_PX wide
	 * in proportion. Children wider together than their parent (a diff's
	 * callers view, where a frame is as wide as the larger of its values)
	 * are narrowed to fit it. Returns {items: [node, x, w, context], depth}.
	 */
	function layout(t, width) {
		var items = [], depth = t.depth[zoom];
		var stack = [zoom, 0, width / size(t, zoom)];

		for (var a = zoom; a !== 0;) {
			a = t.parent[a];
			items.push([a, 0, width, true]);
		}
		while (stack.length) {
			var scale = stack.pop(), x = stack.pop(), n = stack.pop(), cx = x;
			var kids = kidsOf(t, n), sum = 0;

			items.push([n, x, size(t, n) * scale, false]);
			depth = Math.max(depth, t.depth[n]);
			kids.forEach(function (k) {
				sum += size(t, k);
			});
			if (sum > size(t, n))
				scale *= size(t, n) / sum;
			kids.forEach(function (k) {
				var w = size(t, k) * scale;

				if (w >= MIN_PX)
					stack.push(k, cx, scale);
				cx += w;
			});
		}
		return { items: items, depth: depth };
	}

	function box(t, it, top) {
		var n = it[0], w = it[2], f = frames[t.frame[n]], el = document.createElement('div');
		var cls = 'f';

		if (f[2] & INLINED)
			cls += ' i';
		if (it[3])
			cls += ' c';
		if (matched && matched[t.frame[n]])
			cls += ' m';
		if (w >= 3)
			cls += ' g';
		el.className = cls;
		el.style.left = it[1] + 'px';
		el.style.top = top + 'px';
		el.style.width = w + 'px';
		el.style.backgroundColor = colour(t, n);
		el.setAttribute('data-i', n);
		el.setAttribute('data-name', f[0]);
		el.textContent = fit(f[0], w - 2 * PAD - 1, f[2] & INLINED);
		/* padding only around a label: a box is never wider than its share, however narrow */
		if (el.textContent)
			el.className += ' t';
		return el;
	}

	function draw() {
		var t = tree(), frag = document.createDocumentFragment();

		graph.textContent = '';
		if (!(size(t, 0) > 0)) {
			graph.style.height = '';
			graph.textContent = 'No samples of ' + data.type + ': nothing to draw.';
			return;
		}
		var L = layout(t, graph.clientWidth);

		L.items.forEach(function (it) {
			var d = t.depth[it[0]];

			frag.appendChild(box(t, it, (inverted ? d : L.depth - d) * ROW));
		});
		graph.style.height = (L.depth + 1) * ROW + 'px';
		graph.appendChild(frag);
		graph.setAttribute('data-view', inverted ? 'callers' : 'flame');
		resetBtn.disabled = zoom === 0;
	}

	/*
	 * The share of what matches: a node counts unless an ancestor already
	 * did. Each stack counts once whichever way the tree is turned, so the
	 * flame tree answers for the callers view too.
	 */
	function matchedSize() {
		var t = flame, sum = 0, stack = [0];

		while (stack.length) {
			var n = stack.pop();

			if (matched[t.frame[n]])
				sum += size(t, n);
			else
				Array.prototype.push.apply(stack, t.kids[n]);
		}
		return sum;
	}

	/* A diff's matched base and new values, each stack once as above. */
	function matchedDiff() {
		var t = flame, b = 0, n = 0, stack = [0];

		while (stack.length) {
			var i = stack.pop();

			if (matched[t.frame[i]]) {
				b += t.v0[i];
				n += t.v1[i];
			} else {
				Array.prototype.push.apply(stack, t.kids[i]);
			}
		}
		return diffText(b, n);
	}

	function runSearch() {
		var q = search.value.trim().toLowerCase(), t = tree();

		matched = null;
		matchOut.textContent = '';
		if (q) {
			matched = frames.map(function (f) {
				return !(f[2] & ROOT) && f[0].toLowerCase().indexOf(q) >= 0;
			});
			if (DIFF) {
				matchOut.textContent = 'Matched ' + matchedDiff();
			} else {
				var m = matchedSize();

				matchOut.textContent = 'Matched ' + sized(m) + ' of ' + sized(size(t, 0)) +
					' (' + share(m, size(t, 0)) + ')';
			}
		}
		draw();
	}

	function frameAt(e) {
		var el = e.target.closest ? e.target.closest('.f') : null;

		return el && graph.contains(el) ? +el.getAttribute('data-i') : -1;
	}

	graph.addEventListener('mouseover', function (e) {
		var n = frameAt(e);

		details.textContent = n < 0 ? HINT : describe(tree(), n);
	});
	graph.addEventListener('mouseleave', function () {
		details.textContent = HINT;
	});
	graph.addEventListener('click', function (e) {
		var n = frameAt(e);

		if (n < 0)
			return;
		zoom = n;
		draw();
		details.textContent = describe(tree(), n);
	});
	resetBtn.addEventListener('click', function () {
		zoom = 0;
		draw();
	});
	invertBtn.addEventListener('click', function () {
		inverted = !inverted;
		invertBtn.setAttribute('aria-pressed', inverted ? 'true' : 'false');
		zoom = 0;
		runSearch();
	});
	var pending = 0;

	search.addEventListener('input', function () {
		clearTimeout(pending);
		pending = setTimeout(runSearch, 120);
	});
	search.addEventListener('change', runSearch);
	document.addEventListener('keydown', function (e) {
		if (e.key === 'Escape' && zoom !== 0) {
			zoom = 0;
			draw();
		} else if (e.key === '/' && document.activeElement !== search) {
			e.preventDefault();
			search.focus();
		}
	});
	var resizing = 0;

	window.addEventListener('resize', function () {
		cancelAnimationFrame(resizing);
		resizing = requestAnimationFrame(draw);
	});
	details.textContent = HINT;
	draw();
})();
