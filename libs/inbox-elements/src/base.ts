import { createInboxClient, type InboxClient } from "@notify/inbox-client";
import { LitElement, type PropertyValues } from "lit";
import { type InboxStrings, stringsFor } from "./strings.js";

/** What a caller gives for the user's inbox token: the token, or a function that fetches one from its backend. */
export type TokenProvider = () => string | Promise<string>;

/**
 * What both elements share: where the API is (`base-url`), the user's inbox token (`token`, or
 * the `tokenProvider` property), an already made client (`client`, which wins over both), and
 * the language (`locale`, `strings`). The client is made once the element is in a document and
 * has an address and a credential; a subclass starts its work in `attach` and ends it in `detach`.
 */
export abstract class ConnectedElement extends LitElement {
  static override properties = {
    baseUrl: { type: String, attribute: "base-url" },
    token: { type: String },
    tokenProvider: { attribute: false },
    client: { attribute: false },
    locale: { type: String },
    strings: { attribute: false },
  };

  /** The API's origin, e.g. https://notify.example.com (the elements add /api/v1). */
  declare baseUrl: string | undefined;
  /** The user's inbox token, minted by the caller's backend. */
  declare token: string | undefined;
  /**
   * Asked for a token (a caller's backend mints it) at first, and again when the server refuses the
   * last one (it expired or was revoked): a page never holds an API key.
   */
  declare tokenProvider: TokenProvider | undefined;
  /** A client of the caller's own (one shared by both elements, or with other options). */
  declare client: InboxClient | undefined;
  /** A BCP 47 tag ("de", "en-GB"); the browser's language when unset. */
  declare locale: string | undefined;
  /** Replaces any of the locale's texts. */
  declare strings: Partial<InboxStrings> | undefined;

  /** The texts in force, with the resolved locale tag. */
  protected t: InboxStrings & { locale: string } = stringsFor(undefined);
  private active: InboxClient | null = null;
  /** What the element made `active` for (address and credential); null when `active` is the caller's `client`. */
  private madeFor: { baseUrl: string; credential: string | TokenProvider } | null = null;

  protected abstract attach(client: InboxClient): void;
  protected abstract detach(): void;

  override connectedCallback(): void {
    super.connectedCallback();
    // Attached again after a move in the document: start over with the same settings.
    if (this.hasUpdated) this.reconcile();
  }

  override disconnectedCallback(): void {
    super.disconnectedCallback();
    this.release();
  }

  protected override willUpdate(changed: PropertyValues<this>): void {
    if (changed.has("locale") || changed.has("strings") || !this.hasUpdated) {
      this.t = stringsFor(this.locale, this.strings);
    }
  }

  protected override updated(changed: PropertyValues<this>): void {
    if (
      changed.has("baseUrl") ||
      changed.has("token") ||
      changed.has("tokenProvider") ||
      changed.has("client") ||
      !this.active
    ) {
      this.reconcile();
    }
  }

  /** The client in use, if any. */
  protected get inboxClient(): InboxClient | null {
    return this.active;
  }

  /** Starts, keeps or replaces the client for the current settings. */
  private reconcile(): void {
    if (!this.isConnected) return;
    if (this.client) {
      if (this.active === this.client) return;
      this.release();
      this.active = this.client;
      this.madeFor = null;
      this.attach(this.client);
      return;
    }
    const baseUrl = this.baseUrl?.trim();
    const credential = this.tokenProvider ?? (this.token === "" ? undefined : this.token);
    if (!baseUrl || credential === undefined) {
      this.release();
      return;
    }
    // A new address or credential (another user, perhaps) starts over: nothing of the last one is kept.
    if (this.active && this.madeFor?.baseUrl === baseUrl && this.madeFor.credential === credential) return;
    this.release();
    this.madeFor = { baseUrl, credential };
    this.active = createInboxClient({ baseUrl, token: credential });
    this.attach(this.active);
  }

  private release(): void {
    if (!this.active) return;
    this.active = null;
    this.madeFor = null;
    this.detach();
  }

  /** A CustomEvent that crosses the shadow boundary, so the product's page can route on it. */
  protected emit<T>(name: string, detail: T, cancelable = false): boolean {
    return this.dispatchEvent(new CustomEvent<T>(name, { detail, bubbles: true, composed: true, cancelable }));
  }
}

/** A problem's text for a person: the API's `detail` when the client passed it on, else the message. */
export function describeError(error: unknown): string {
  if (error && typeof error === "object") {
    const problem = (error as { problem?: { detail?: unknown }; detail?: unknown }).problem;
    const detail = problem?.detail ?? (error as { detail?: unknown }).detail;
    if (typeof detail === "string" && detail !== "") return detail;
    if (error instanceof Error && error.message) return error.message;
  }
  return String(error);
}
