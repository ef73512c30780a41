/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Test driver for heapbpf's flame graph page (tests/integration/test_flamegraph.c).
 * The test appends it to a copy of a page, Chromium runs it headless after
 * the page's own script, and it acts as a user would (hover, click, search,
 * invert) through DOM events, measuring the page's DOM only. Results go into
 * a <pre> as tab-separated lines that Chromium's --dump-dom prints:
 *
 *   w	NAME	RATIO		summed width of NAME's frames / the root's, as drawn
 *   hover	NAME	TEXT	the details line while the pointer is on NAME
 *   bg	NAME	COLOUR	a diff page's: NAME's first frame's computed background
 *   ...
 *
 * What to zoom into and search for comes in the URL fragment:
 * #zoom=NAME&search=TEXT, and under=1 to list which frame stands on which.
 */
(function () {
	'use strict';

	var out = [];
	var graph = document.getElementById('hb-graph');
	var args = new URLSearchParams(location.hash.slice(1));

	function put() {
		out.push(Array.prototype.join.call(arguments, '\t'));
	}

	function boxes() {
		return Array.prototype.slice.call(graph.querySelectorAll('.f'));
	}

	function named(name) {
		return boxes().filter(function (el) {
			return el.getAttribute('data-name') === name && !el.classList.contains('c');
		});
	}

	function width(el) {
		return el.getBoundingClientRect().width;
	}

	/* Each name's summed width over a reference width; only frames not drawn as context. */
	function widths(prefix, ref, filter) {
		var sums = new Map();

		boxes().forEach(function (el) {
			var n = el.getAttribute('data-name');

			if (el.classList.contains('c') || (filter && !filter(el)))
				return;
			sums.set(n, (sums.get(n) || 0) + width(el));
		});
		sums.forEach(function (w, n) {
			put(prefix, n, (w / ref).toFixed(7));
		});
	}

	/* What is drawn, as text: two draws of the same view give the same snapshot. */
	function snapshot() {
		return boxes().map(function (el) {
			return el.getAttribute('data-name') + '@' + el.style.left + '/' + el.style.width;
		}).join('|');
	}

	function hover(el) {
		el.dispatchEvent(new MouseEvent('mouseover', { bubbles: true }));
		return document.getElementById('hb-details').textContent;
	}

	function click(el) {
		el.dispatchEvent(new MouseEvent('click', { bubbles: true }));
	}

	function timed(name, fn) {
		var t = performance.now();

		fn();
		put('ms', name, (performance.now() - t).toFixed(1));
	}

	function checkLabels() {
		var overflow = 0, bad = 0;

		boxes().forEach(function (el) {
			var name = el.getAttribute('data-name'), text = el.textContent;

			if (el.scrollWidth > el.clientWidth)
				overflow++;
			if (text && text !== name &&
			    !(text.slice(-1) === '\u2026' && name.indexOf(text.slice(0, -1)) === 0))
				bad++;
		});
		put('overflow', overflow);
		put('badlabels', bad);
	}

	/* Which frame each frame stands on (one row lower, spanning it), once per pair of names. */
	function standsOn() {
		var all = boxes(), seen = new Set();

		all.forEach(function (el) {
			var top = parseFloat(el.style.top), l = parseFloat(el.style.left);
			var r = l + parseFloat(el.style.width);

			all.forEach(function (p) {
				var pl = parseFloat(p.style.left), pr = pl + parseFloat(p.style.width);
				var key = el.getAttribute('data-name') + '\t' + p.getAttribute('data-name');

				if (parseFloat(p.style.top) === top + 18 && pl <= l + 0.01 && pr >= r - 0.01 &&
				    !seen.has(key)) {
					seen.add(key);
					put('under', key);
				}
			});
		});
	}

	function flameChecks() {
		var root = named('all')[0], W = width(root), data;

		data = JSON.parse(document.getElementById('hb-data').textContent);
		put('ms', 'load', performance.now().toFixed(1));
		put('title', document.getElementById('hb-title').textContent);
		put('doctitle', document.title);
		put('sub', document.getElementById('hb-sub').textContent);
		put('view', graph.getAttribute('data-view'));
		put('frames', boxes().length);
		put('nodes', data.nodes.length / 5);
		put('root_px', W.toFixed(2));
		widths('w', W);
		checkLabels();
		boxes().forEach(function (el) {
			if (el.classList.contains('i'))
				put('inlined', el.getAttribute('data-name'), getComputedStyle(el).fontStyle);
		});
		/* every name as the data has it, unaltered, on a frame: nothing was parsed as markup */
		data.frames.forEach(function (f) {
			put('name_drawn', named(f[0]).length > 0 ? 1 : 0, JSON.stringify(f[0]));
		});
		put('hover', 'all', hover(root));
		put('scripts', document.scripts.length);
		put('pwned', window.pwned || 0);
	}

	/* A diff page: each name's colour as drawn and its details line, from its first frame. */
	function diffChecks() {
		var seen = new Set();

		boxes().forEach(function (el) {
			var n = el.getAttribute('data-name');

			if (el.classList.contains('c') || seen.has(n))
				return;
			seen.add(n);
			put('bg', n, getComputedStyle(el).backgroundColor);
			put('dhover', n, hover(el));
		});
		put('legend', document.getElementById('hb-legend').textContent);
	}

	function zoomChecks(name) {
		var target = named(name)[0], before = snapshot(), zw;

		if (!target) {
			put('zoom_missing', name);
			return;
		}
		put('hover', name, hover(target));
		timed('zoom', function () {
			click(target);
		});
		target = named(name)[0];
		zw = width(target);
		put('zoom_changed', snapshot() !== before ? 1 : 0);
		put('zoom_target_ratio', (zw / width(graph)).toFixed(5));
		widths('zw', zw);
		boxes().forEach(function (el) {
			if (el.classList.contains('c'))
				put('context', el.getAttribute('data-name'));
		});
		put('zoom_hover', name, hover(target));
		checkLabels();
		timed('reset', function () {
			click(document.getElementById('hb-reset'));
		});
		put('reset_restores', snapshot() === before ? 1 : 0);
	}

	function searchChecks(q) {
		var search = document.getElementById('hb-search');

		search.value = q;
		timed('search', function () {
			search.dispatchEvent(new Event('change'));
		});
		put('match', document.getElementById('hb-match').textContent);
		boxes().forEach(function (el) {
			if (el.classList.contains('m'))
				put('matched', el.getAttribute('data-name'));
		});
		search.value = '';
		search.dispatchEvent(new Event('change'));
		put('unmatched', graph.querySelectorAll('.f.m').length);
	}

	/* The callers view's second level: "LEAF;CALLER" and its width over W, as cw2 lines. */
	function callersOfLeaves(W) {
		var all = boxes(), sums = new Map();
		var leaves = all.filter(function (el) {
			return parseFloat(el.style.top) === 18;
		});

		all.forEach(function (el) {
			var l = parseFloat(el.style.left), r = l + parseFloat(el.style.width);

			if (parseFloat(el.style.top) !== 36)
				return;
			leaves.forEach(function (p) {
				var pl = parseFloat(p.style.left), pr = pl + parseFloat(p.style.width);
				var key = p.getAttribute('data-name') + ';' + el.getAttribute('data-name');

				if (pl <= l + 0.01 && pr >= r - 0.01)
					sums.set(key, (sums.get(key) || 0) + width(el));
			});
		});
		sums.forEach(function (w, key) {
			put('cw2', key, (w / W).toFixed(7));
		});
	}

	/* The callers view: the first level under the root are the frames that allocated. */
	function callersChecks() {
		var btn = document.getElementById('hb-invert'), W;

		timed('invert', function () {
			click(btn);
		});
		put('callers_view', graph.getAttribute('data-view'), btn.getAttribute('aria-pressed'));
		W = width(named('all')[0]);
		widths('cw', W, function (el) {
			return parseFloat(el.style.top) === 18;
		});
		callersOfLeaves(W);
		click(btn);
		put('flame_again', graph.getAttribute('data-view'));
	}

	try {
		flameChecks();
		if (JSON.parse(document.getElementById('hb-data').textContent).diff)
			diffChecks();
		if (args.get('under'))
			standsOn();
		if (args.get('zoom'))
			zoomChecks(args.get('zoom'));
		if (args.get('search'))
			searchChecks(args.get('search'));
		callersChecks();
		put('done', 1);
	} catch (e) {
		put('error', String(e && e.stack || e));
	}
	var pre = document.createElement('pre');

	pre.id = 'hb-test';
	pre.textContent = 'HBTEST-BEGIN\n' + out.join('\n') + '\nHBTEST-END\n';
	document.body.appendChild(pre);
})();
