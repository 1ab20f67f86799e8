// Small pieces every page uses alike.

/** Head is a table's header row; an empty name is an actions column, named for screen readers only. */
export function Head(props: { cols: string[] }) {
  return (
    <thead>
      <tr>
        {props.cols.map((c, i) => (
          <th scope="col" key={i}>
            {c || <span class="sr">Actions</span>}
          </th>
        ))}
      </tr>
    </thead>
  );
}

/** Pager moves between pages: label says where the reader is. */
export function Pager(props: { label: string; where: string; back: string; forward: string; canBack: boolean; canForward: boolean; onBack: () => void; onForward: () => void }) {
  return (
    <nav class="pages" aria-label={props.label}>
      <button type="button" disabled={!props.canBack} onClick={props.onBack}>
        {props.back}
      </button>
      <span>{props.where}</span>
      <button type="button" disabled={!props.canForward} onClick={props.onForward}>
        {props.forward}
      </button>
    </nav>
  );
}
