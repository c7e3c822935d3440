/**
 * Reading the text view back (policies only): the scripted oracle and the random policy see exactly
 * what the agent sees, and find elements in it by role and label.
 */
export interface ViewElement {
  id: number;
  role: string;
  label: string;
  /** The rest of the line: value="…", checked, selected, options="…", focused… */
  attributes: string;
}

export interface PageView {
  elements: ViewElement[];
  /** Non-interactive text lines, in order. */
  texts: string[];
  moreAbove: boolean;
  moreBelow: boolean;
}

const ELEMENT = /^\[(\d+)\] (\w+) ("(?:[^"\\]|\\.)*")(.*)$/;
const TEXT = /^(?:text|heading) ("(?:[^"\\]|\\.)*")$/;

export function parsePageView(observation: string): PageView {
  const view: PageView = { elements: [], texts: [], moreAbove: false, moreBelow: false };
  for (const line of observation.split('\n')) {
    const element = ELEMENT.exec(line);
    if (element) {
      view.elements.push({ id: Number(element[1]), role: element[2], label: JSON.parse(element[3]) as string, attributes: element[4].trim() });
      continue;
    }
    const text = TEXT.exec(line);
    if (text) view.texts.push(JSON.parse(text[1]) as string);
    else if (line.startsWith('Page ')) {
      view.moreAbove = line.includes('; more above');
      view.moreBelow = line.includes('; more below');
    }
  }
  return view;
}

/** The value of attribute `name` ("value", "selected", "options") of an element line. */
export function attribute(element: ViewElement, name: string): string | undefined {
  const m = new RegExp(`(?:^| )${name}=("(?:[^"\\\\]|\\\\.)*")`).exec(element.attributes);
  return m ? (JSON.parse(m[1]) as string) : undefined;
}
