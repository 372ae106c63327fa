// A site's connections: the WebSocket its probes run on and a second one for the echoes
// during transfers (loaded latency), each opened when a round first needs it and closed with
// the site or when probing stops.

import { ECHO_BYTES } from "./measure/echo";
import type { Link } from "./measure/measurement";
import type { StepTransport } from "./plan";
import { OPEN_TIMEOUT_MS, WsConnection } from "./ws-probe";

export class SiteLink implements Link {
  private main: WsConnection | undefined;
  private second: WsConnection | undefined;
  /** The smallest payload cap the site's echo-node stated (HELLO), bytes. */
  maxPayload = Infinity;

  /** @param spend charges the bytes of a connection's first echo to the budget. */
  constructor(
    readonly base: string,
    private readonly spend: (bytes: number) => void,
  ) {}

  get conn(): WsConnection {
    if (this.main === undefined) throw new Error(`no connection to ${this.base}`);
    return this.main;
  }

  get load(): WsConnection {
    if (this.second === undefined) throw new Error(`no second connection to ${this.base}`);
    return this.second;
  }

  async connect(transport: StepTransport): Promise<boolean> {
    if (transport === "http" || this.main?.open === true) return false;
    this.main = await this.open();
    return true;
  }

  connected(transport: StepTransport): boolean {
    return transport === "http" || this.main?.open === true;
  }

  async connectLoad(): Promise<void> {
    if (this.second?.open !== true) this.second = await this.open();
  }

  close(): void {
    this.main?.close();
    this.second?.close();
  }

  /**
   * Opens a probe connection. The first echo on a new connection pays for its warm-up (JavaNws
   * handshake), so it is kept out of the RTT series.
   */
  private async open(): Promise<WsConnection> {
    const c = await WsConnection.open(this.base, OPEN_TIMEOUT_MS);
    this.maxPayload = Math.min(this.maxPayload, c.hello.maxPayload);
    this.spend(ECHO_BYTES);
    await c.echo(OPEN_TIMEOUT_MS);
    return c;
  }
}
