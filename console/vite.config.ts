// The console is served by the server at /console/, from the files this build writes to
// dist/ (embedded in the binary): every asset path is under /console/, nothing is loaded
// from another host.
import { defineConfig } from "vite";

export default defineConfig({
  base: "/console/",
  build: {
    outDir: "dist",
    emptyOutDir: true,
    target: "es2022",
    // One small bundle: the console is a handful of pages over one generated client.
    modulePreload: { polyfill: false },
    reportCompressedSize: false,
  },
});
