/** The web task types by name. */
import type { WebTaskType } from '../task-type.ts';
import { checkBoxes } from './check-boxes.ts';
import { clickButton } from './click-button.ts';
import { datePicker } from './date-picker.ts';
import { enterText } from './enter-text.ts';
import { fillForm } from './fill-form.ts';
import { keyboardCounter } from './keyboard-counter.ts';
import { login } from './login.ts';
import { navigateTabs } from './navigate-tabs.ts';
import { reorderList } from './reorder-list.ts';
import { scrollFind } from './scroll-find.ts';
import { searchList } from './search-list.ts';
import { selectOption } from './select-option.ts';

export const TASK_TYPES = [
  clickButton, enterText, selectOption, checkBoxes, login, navigateTabs, searchList, fillForm, datePicker, reorderList, scrollFind, keyboardCounter,
] as const satisfies readonly WebTaskType[];

export const TASK_TYPE_NAMES = TASK_TYPES.map((t) => t.name) as [string, ...string[]];

export function taskType(name: string): WebTaskType {
  const type = TASK_TYPES.find((t) => t.name === name);
  if (!type) throw new Error(`unknown web task type ${JSON.stringify(name)} (known: ${TASK_TYPE_NAMES.join(', ')})`);
  return type;
}
