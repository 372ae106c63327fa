// Vite's `?url` imports: the URL of the emitted asset (here the forecaster's .wasm file).
declare module "*?url" {
  const url: string;
  export default url;
}
