import type { ComponentChildren } from "preact";

/** A table's column headers, each a column header for assistive technology (`scope="col"`). */
export function TableHead({ columns }: { columns: ComponentChildren[] }) {
  return (
    <thead>
      <tr>
        {columns.map((c, i) => <th key={i} scope="col">{c}</th>)}
      </tr>
    </thead>
  );
}
