import { useEffect, useRef, useState } from "preact/hooks";
import { APIError, followEvents, type CorralEvent } from "./api";

/** useNow ticks every second, for ages and countdowns. */
export function useNow(): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const t = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(t);
  }, []);
  return now;
}

export interface Live<T> {
  data: T | null;
  err: unknown;
  /** gone is set when the read answered 404. */
  gone: boolean;
  /** live is whether the event stream is followed now. */
  live: boolean;
  reload: () => void;
}

/**
 * useLive reads something with load, and reads it again (batched) each
 * time the tenant's event stream carries an event that wants says
 * concerns it. A load superseded by a newer one is dropped.
 */
export function useLive<T>(apiKey: string, load: () => Promise<T>, deps: unknown[], wants: (ev: CorralEvent) => boolean): Live<T> {
  const [data, setData] = useState<T | null>(null);
  const [err, setErr] = useState<unknown>(null);
  const [gone, setGone] = useState(false);
  const [live, setLive] = useState(false);
  const reload = useRef<() => void>(() => {});
  const wantsRef = useRef(wants);
  wantsRef.current = wants;

  useEffect(() => {
    let generation = 0;
    let stopped = false;
    const run = async () => {
      const mine = ++generation;
      try {
        const d = await load();
        if (stopped || mine !== generation) return;
        setData(d);
        setErr(null);
      } catch (e) {
        if (stopped || mine !== generation) return;
        if (e instanceof APIError && e.status === 404) setGone(true);
        else setErr(e);
      }
    };
    reload.current = run;
    setGone(false);
    run();
    return () => {
      stopped = true;
    };
  }, [apiKey, ...deps]);

  useEffect(() => {
    const ctl = new AbortController();
    let timer: number | undefined;
    followEvents(
      apiKey,
      ctl.signal,
      (ev) => {
        setLive(true);
        if (!wantsRef.current(ev)) return;
        clearTimeout(timer);
        timer = setTimeout(() => reload.current(), 120) as unknown as number;
      },
      () => setLive(false),
    );
    setLive(true);
    return () => {
      ctl.abort();
      clearTimeout(timer);
    };
  }, [apiKey]);

  return { data, err, gone, live, reload: () => reload.current() };
}

/** usePoll calls fn every ms while enabled and the page is visible, and once at once. */
export function usePoll(fn: () => void, ms: number, enabled: boolean, deps: unknown[]) {
  const fnRef = useRef(fn);
  fnRef.current = fn;
  useEffect(() => {
    if (!enabled) return;
    fnRef.current();
    const t = setInterval(() => {
      if (document.visibilityState === "visible") fnRef.current();
    }, ms);
    return () => clearInterval(t);
  }, [enabled, ms, ...deps]);
}
