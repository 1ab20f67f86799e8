// The console is served by corral serve at /ui/, from the files this
// build writes into internal/console/dist (embedded in the binary).
import { defineConfig } from "vite";

export default defineConfig({
  base: "/ui/",
  build: {
    outDir: "../internal/console/dist",
    emptyOutDir: true,
    // One script and one stylesheet, no inline code: the console's CSP
    // allows scripts and styles from its own origin only.
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    sourcemap: false,
  },
});
