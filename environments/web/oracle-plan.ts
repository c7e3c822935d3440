/** Building blocks of the oracle plans: find an element by role and label on screen, scrolling when it is not. */
import type { OracleMove, OracleStep } from './task-type.ts';
import type { PageView, ViewElement } from './page-view.ts';

export function findElement(view: PageView, role: string, label: string): ViewElement | undefined {
  return view.elements.find((e) => e.role === role && e.label === label);
}

/** Scrolls towards content not on screen: down while there is more below, then up. */
export function scrollTowards(view: PageView): OracleMove {
  return { action: view.moreBelow ? 'scroll down' : 'scroll up', advance: false };
}

const quote = (text: string) => JSON.stringify(text);

/** One action on the element with this role and label (scrolling to it first). */
export function on(role: string, label: string, action: 'click' | 'check' | { type: string } | { select: string }): OracleStep {
  return (view) => {
    const element = findElement(view, role, label);
    if (!element) return scrollTowards(view);
    if (action === 'click' || action === 'check') return { action: `${action} ${element.id}`, advance: true };
    if ('type' in action) return { action: `type ${element.id} ${quote(action.type)}`, advance: true };
    return { action: `select ${element.id} ${quote(action.select)}`, advance: true };
  };
}

export function press(key: string): OracleStep {
  return () => ({ action: `press ${key}`, advance: true });
}

/** Repeats `step` until `satisfied` holds for the view. */
export function until(satisfied: (view: PageView) => boolean, step: (view: PageView) => OracleMove): OracleStep {
  return (view) => {
    if (satisfied(view)) return null;
    const move = step(view);
    return move && { action: move.action, advance: false };
  };
}
