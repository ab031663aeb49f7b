import type { ComponentChildren } from "preact";

/** A filter that picks one of the known values (the options given), or any. */
export function Pick(
  props: {
    label: string;
    name: string;
    value: string;
    onChange: (e: { currentTarget: { value: string } }) => void;
    children: ComponentChildren;
  },
) {
  return (
    <label>
      {props.label}
      <select name={props.name} value={props.value} onChange={props.onChange}>
        <option value="">any</option>
        {props.children}
      </select>
    </label>
  );
}
