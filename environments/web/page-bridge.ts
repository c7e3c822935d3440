/**
 * The page-side half of the web environment, injected into every task page and identical on both
 * backends: it renders the compact text view (stable element ids, visible text, a virtual screen of
 * lines that `scroll` moves), validates actions against what is on screen, performs them with DOM
 * events (the happy-dom backend; Chromium uses real input instead), and holds the page's verdict,
 * which the task's own script sets through `window.__esopt.finish(success)`.
 *
 * Plain ES2017 in a string: it runs in the page, not in Node, and must not be transformed.
 */
export const PAGE_BRIDGE = String.raw`(function () {
  var SCREEN = 30;
  var nextId = 1;
  var offset = 0;
  var verdict = { done: false, success: false };
  var INTERACTIVE = { BUTTON: 1, A: 1, INPUT: 1, SELECT: 1, TEXTAREA: 1 };
  var SKIP = { SCRIPT: 1, STYLE: 1, TEMPLATE: 1, HEAD: 1, NOSCRIPT: 1 };

  function hidden(el) {
    for (var e = el; e && e.nodeType === 1; e = e.parentElement) {
      if (e.hasAttribute('hidden') || (e.style && (e.style.display === 'none' || e.style.visibility === 'hidden'))) return true;
    }
    return false;
  }
  function roleOf(el) {
    var role = el.getAttribute('role');
    if (role === 'button' || role === 'tab' || role === 'link' || role === 'option' || role === 'gridcell') return role;
    if (el.tagName === 'BUTTON') return 'button';
    if (el.tagName === 'A') return 'link';
    if (el.tagName === 'SELECT') return 'select';
    if (el.tagName === 'TEXTAREA') return 'textbox';
    if (el.tagName === 'INPUT') {
      var t = (el.getAttribute('type') || 'text').toLowerCase();
      if (t === 'checkbox' || t === 'radio') return t;
      if (t === 'password') return 'password';
      if (t === 'button' || t === 'submit') return 'button';
      return 'textbox';
    }
    if (el.getAttribute('tabindex') !== null) return 'widget';
    return null;
  }
  function clean(text) { return String(text || '').replace(/\s+/g, ' ').trim(); }
  function labelOf(el) {
    if (el.getAttribute('aria-label')) return clean(el.getAttribute('aria-label'));
    if (el.id) {
      var label = document.querySelector('label[for="' + el.id + '"]');
      if (label) return clean(label.textContent);
    }
    var wrapping = el.closest && el.closest('label');
    if (wrapping) return clean(wrapping.textContent);
    if (el.tagName === 'INPUT' && (el.type === 'button' || el.type === 'submit')) return clean(el.value);
    if (el.getAttribute('placeholder')) return clean(el.getAttribute('placeholder'));
    if (el.tagName !== 'INPUT' && el.tagName !== 'SELECT' && el.tagName !== 'TEXTAREA') return clean(el.textContent);
    return clean(el.getAttribute('name'));
  }
  function idOf(el) {
    var id = el.getAttribute('data-esopt-id');
    if (!id) { id = String(nextId++); el.setAttribute('data-esopt-id', id); }
    return id;
  }
  function describe(el, role) {
    var parts = ['[' + idOf(el) + ']', role, JSON.stringify(labelOf(el))];
    if (role === 'textbox') parts.push('value=' + JSON.stringify(el.value));
    if (role === 'password') parts.push('value=' + JSON.stringify(el.value.replace(/./g, '*')));
    if (role === 'checkbox' || role === 'radio') parts.push(el.checked ? 'checked' : 'unchecked');
    if (role === 'select') {
      var opts = [];
      for (var i = 0; i < el.options.length; i++) opts.push(clean(el.options[i].textContent));
      var sel = el.selectedIndex >= 0 ? clean(el.options[el.selectedIndex].textContent) : '';
      parts.push('selected=' + JSON.stringify(sel), 'options=' + JSON.stringify(opts.join(' | ')));
    }
    if (el.getAttribute('aria-selected') === 'true') parts.push('selected');
    if (el.getAttribute('aria-pressed') === 'true') parts.push('pressed');
    if (el.disabled) parts.push('disabled');
    if (document.activeElement === el) parts.push('focused');
    return parts.join(' ');
  }
  function ownText(el) {
    var text = '';
    for (var n = el.firstChild; n; n = n.nextSibling) if (n.nodeType === 3) text += n.textContent;
    return clean(text);
  }
  function walk(el, lines) {
    if (SKIP[el.tagName] || hidden(el)) return;
    if (el.tagName === 'LABEL' && el.getAttribute('for')) return;
    var role = roleOf(el);
    if (role && (INTERACTIVE[el.tagName] || el.getAttribute('role') || el.getAttribute('tabindex') !== null)) {
      lines.push({ id: idOf(el), text: describe(el, role) });
      if (role !== 'widget') return;
    }
    var text = ownText(el);
    if (text && !(el.tagName === 'LABEL' && el.querySelector('input'))) lines.push({ id: null, text: (/^H[1-6]$/.test(el.tagName) ? 'heading ' : 'text ') + JSON.stringify(text) });
    for (var c = el.firstElementChild; c; c = c.nextElementSibling) walk(c, lines);
  }
  function allLines() {
    var lines = [];
    if (document.body) walk(document.body, lines);
    return lines;
  }
  /** ARIA role names for the accessibility tree (BrowserGym's AXTree view names them so). */
  var AX_ROLE = { select: 'combobox', password: 'textbox', widget: 'generic' };
  var AX_LANDMARK = { NAV: 'navigation', MAIN: 'main', HEADER: 'banner', FOOTER: 'contentinfo', FORM: 'form', UL: 'list', OL: 'list', LI: 'listitem', TABLE: 'table', TR: 'row', TD: 'cell', TH: 'columnheader', DIALOG: 'dialog' };
  function axWalk(el, depth, out) {
    if (SKIP[el.tagName] || hidden(el)) return;
    if (el.tagName === 'LABEL' && el.getAttribute('for')) return;
    var pad = new Array(depth + 1).join('	');
    var role = roleOf(el);
    if (role && (INTERACTIVE[el.tagName] || el.getAttribute('role') || el.getAttribute('tabindex') !== null)) {
      // The same id and properties as the text view, so every grammar's element ids mean the same element.
      var line = describe(el, role).replace(/^\[(\d+)\] [a-z]+/, '[$1] ' + (AX_ROLE[role] || role));
      if (role === 'password') line += ' protected';
      out.push(pad + line);
      if (role !== 'widget') return;
    }
    var landmark = /^H([1-6])$/.exec(el.tagName) ? 'heading' : AX_LANDMARK[el.tagName] || (el.tagName === 'IMG' && el.getAttribute('alt') ? 'img' : null);
    var inner = depth;
    if (landmark === 'heading' || landmark === 'img') {
      out.push(pad + landmark + ' ' + JSON.stringify(landmark === 'img' ? clean(el.getAttribute('alt')) : clean(el.textContent)) + (landmark === 'heading' ? ' level=' + el.tagName.slice(1) : ''));
      return;
    }
    if (landmark) { out.push(pad + landmark); inner = depth + 1; }
    for (var n = el.firstChild; n; n = n.nextSibling) {
      if (n.nodeType === 3) {
        var text = clean(n.textContent);
        if (text && !(el.tagName === 'LABEL' && el.querySelector('input'))) out.push(new Array(inner + 2).join('	') + 'StaticText ' + JSON.stringify(text));
      } else if (n.nodeType === 1) axWalk(n, inner + 1, out);
    }
  }
  function clamp(lines) {
    var max = Math.max(0, lines.length - SCREEN);
    if (offset > max) offset = max;
    if (offset < 0) offset = 0;
  }
  function find(id) {
    if (!/^[0-9]+$/.test(String(id))) return null;
    return document.querySelector('[data-esopt-id="' + id + '"]');
  }

  window.__esopt = {
    setScreen: function (lines) { SCREEN = lines; },
    finish: function (success) { if (!verdict.done) verdict = { done: true, success: !!success }; },
    result: function () { return verdict; },
    observe: function () {
      var lines = allLines();
      clamp(lines);
      var shown = lines.slice(offset, offset + SCREEN).map(function (l) { return l.text; });
      var above = offset > 0, below = offset + SCREEN < lines.length;
      var head = 'Page ' + JSON.stringify(document.title) + ' (lines ' + (lines.length ? offset + 1 : 0) + '-' + Math.min(lines.length, offset + SCREEN) + ' of ' + lines.length +
        (above ? '; more above' : '') + (below ? '; more below' : '') + ')';
      return [head].concat(shown).join('\n');
    },
    /**
     * The whole page as an accessibility tree, one node a line, indented by depth: interactive elements as
     * [id] role "name" and their state (as the text view), headings, landmarks, lists and StaticText.
     * At most \`max\` lines; past it, a last line says how many were left out.
     */
    axtree: function (max) {
      var out = [];
      if (document.body) axWalk(document.body, 0, out);
      var head = 'RootWebArea ' + JSON.stringify(document.title);
      if (out.length > max) out = out.slice(0, max).concat(['(' + (out.length - max) + ' more lines not shown)']);
      return [head].concat(out).join('\n');
    },
    /** Why the action cannot be done, or null: the same rules on both backends. */
    check: function (kind, id, arg) {
      if (kind === 'scroll') {
        var all = allLines();
        clamp(all);
        if (arg === 'up' && offset === 0) return 'already at the top of the page';
        if (arg === 'down' && offset + SCREEN >= all.length) return 'already at the bottom of the page';
        return null;
      }
      if (kind === 'press') return null;
      var el = find(id);
      if (!el || !el.isConnected) return 'there is no element [' + id + '] on the page';
      if (hidden(el)) return 'element [' + id + '] is not visible';
      var lines = allLines();
      clamp(lines);
      var at = -1;
      for (var i = 0; i < lines.length; i++) if (lines[i].id === String(id)) at = i;
      if (at < 0) return 'element [' + id + '] cannot be interacted with';
      if (at < offset) return 'element [' + id + '] is off screen; scroll up to reach it';
      if (at >= offset + SCREEN) return 'element [' + id + '] is off screen; scroll down to reach it';
      if (el.disabled) return 'element [' + id + '] is disabled';
      var role = roleOf(el);
      if (kind === 'type' && role !== 'textbox' && role !== 'password') return 'element [' + id + '] is a ' + role + ', not a text field';
      if (kind === 'check' && role !== 'checkbox' && role !== 'radio') return 'element [' + id + '] is a ' + role + ', not a checkbox or radio button';
      if (kind === 'select') {
        if (role !== 'select') return 'element [' + id + '] is a ' + role + ', not a select';
        for (var k = 0; k < el.options.length; k++) if (clean(el.options[k].textContent) === arg) return null;
        return 'select [' + id + '] has no option ' + JSON.stringify(arg);
      }
      return null;
    },
    scroll: function (dir) {
      var step = Math.max(1, Math.floor(SCREEN / 2));
      offset += dir === 'down' ? step : -step;
      clamp(allLines());
    },
    /** DOM-event versions of the actions, for backends without real input (happy-dom). */
    act: function (kind, id, arg) {
      var el = find(id);
      if (kind === 'press') {
        var target = document.activeElement || document.body;
        var init = { key: arg, bubbles: true, cancelable: true };
        target.dispatchEvent(new KeyboardEvent('keydown', init));
        target.dispatchEvent(new KeyboardEvent('keyup', init));
        return;
      }
      if (typeof el.focus === 'function') el.focus();
      if (kind === 'click' || (kind === 'check' && !el.checked)) {
        el.dispatchEvent(new MouseEvent('mousedown', { bubbles: true, cancelable: true }));
        el.dispatchEvent(new MouseEvent('mouseup', { bubbles: true, cancelable: true }));
        el.click();
      } else if (kind === 'type') {
        el.value = arg;
        el.dispatchEvent(new Event('input', { bubbles: true }));
        el.dispatchEvent(new Event('change', { bubbles: true }));
      } else if (kind === 'select') {
        for (var k = 0; k < el.options.length; k++) if (clean(el.options[k].textContent) === arg) el.selectedIndex = k;
        el.dispatchEvent(new Event('input', { bubbles: true }));
        el.dispatchEvent(new Event('change', { bubbles: true }));
      }
    },
  };
})();`;
