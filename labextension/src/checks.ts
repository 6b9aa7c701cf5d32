/**
 * The checks the protocol's shapes are made of (protocol.ts): each says '' when a value is good, else what it should be.
 *
 * Pure functions only, table-tested through protocol.spec.ts.
 */

import type { JSONObject } from './protocol';

export type Check = (value: unknown) => string; // '' when the value is good, else what it should be

export const isObject = (value: unknown): value is JSONObject =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

export const str =
  (limit: number): Check =>
  value =>
    typeof value === 'string' && value.length <= limit
      ? ''
      : `a string of at most ${limit} characters`;

export const oneOf =
  (...choices: string[]): Check =>
  value =>
    typeof value === 'string' && choices.includes(value)
      ? ''
      : `one of ${choices.join(', ')}`;

export const intAtLeast =
  (low: number): Check =>
  value =>
    Number.isInteger(value) && (value as number) >= low
      ? ''
      : `an integer of at least ${low}`;

export const list =
  (item: Check, limit: number): Check =>
  value => {
    if (!Array.isArray(value) || value.length > limit) {
      return `a list of at most ${limit} items`;
    }
    for (let i = 0; i < value.length; i++) {
      const wrong = item(value[i]);
      if (wrong) {
        return `a list whose item ${i} is ${wrong}`;
      }
    }
    return '';
  };

export const anyObject: Check = value => (isObject(value) ? '' : 'an object');

/** An object with exactly these keys (the optional ones may be left out), each of its own shape. */
export const object =
  (
    required: Record<string, Check>,
    optional: Record<string, Check> = {}
  ): Check =>
  value => {
    if (!isObject(value)) {
      return 'an object';
    }
    const known = new Set([...Object.keys(required), ...Object.keys(optional)]);
    const extra = Object.keys(value).filter(key => !known.has(key));
    if (extra.length) {
      return `an object without the keys ${extra.sort().join(', ')}`;
    }
    for (const key of Object.keys(required)) {
      if (!(key in value)) {
        return `an object with '${key}'`;
      }
    }
    for (const [key, rule] of Object.entries({ ...required, ...optional })) {
      if (key in value) {
        const wrong = rule(value[key]);
        if (wrong) {
          return `an object whose '${key}' is ${wrong}`;
        }
      }
    }
    return '';
  };
