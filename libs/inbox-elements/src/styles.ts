import { css } from "lit";

/**
 * The design tokens both elements read. Each is a `--notify-*` custom property a caller sets on
 * the element (or any ancestor); the defaults meet WCAG AA contrast on white.
 */
export const tokens = css`
  :host {
    --_font: var(--notify-font-family, system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", sans-serif);
    --_font-size: var(--notify-font-size, 14px);
    --_text: var(--notify-color-text, #1b1f24);
    --_muted: var(--notify-color-muted, #57606a);
    --_bg: var(--notify-color-background, #ffffff);
    --_surface: var(--notify-color-surface, #f6f8fa);
    --_border: var(--notify-color-border, #d0d7de);
    --_accent: var(--notify-color-accent, #0a58ca);
    --_accent-text: var(--notify-color-accent-text, #ffffff);
    --_unread: var(--notify-color-unread, #eef4ff);
    --_badge: var(--notify-color-badge, #c62828);
    --_badge-text: var(--notify-color-badge-text, #ffffff);
    --_focus: var(--notify-color-focus, #0a58ca);
    --_danger: var(--notify-color-danger, #b3261e);
    --_success: var(--notify-color-success, #1a7f37);
    --_radius: var(--notify-radius, 8px);
    --_space: var(--notify-spacing, 8px);
    --_shadow: var(--notify-shadow, 0 8px 24px rgba(27, 31, 36, 0.18));
    font-family: var(--_font);
    font-size: var(--_font-size);
    line-height: 1.4;
    color: var(--_text);
  }
  [hidden] {
    display: none !important;
  }
  .visually-hidden {
    position: absolute;
    width: 1px;
    height: 1px;
    margin: -1px;
    padding: 0;
    overflow: hidden;
    clip: rect(0 0 0 0);
    white-space: nowrap;
    border: 0;
  }
  button,
  input,
  select {
    font: inherit;
    color: inherit;
  }
  :focus-visible {
    outline: 2px solid var(--_focus);
    outline-offset: 2px;
  }
  .text-button {
    background: none;
    border: 1px solid transparent;
    border-radius: calc(var(--_radius) / 2);
    padding: calc(var(--_space) / 2) var(--_space);
    color: var(--_accent);
    cursor: pointer;
    min-height: 28px;
  }
  .text-button:hover {
    background: var(--_surface);
  }
  .text-button:disabled {
    color: var(--_muted);
    cursor: default;
  }
  .primary-button {
    background: var(--_accent);
    color: var(--_accent-text);
    border: 0;
    border-radius: var(--_radius);
    padding: var(--_space) calc(var(--_space) * 2);
    cursor: pointer;
    min-height: 36px;
  }
  .primary-button:disabled {
    opacity: 0.7;
    cursor: default;
  }
  @media (prefers-reduced-motion: reduce) {
    *,
    *::before,
    *::after {
      animation: none !important;
      transition: none !important;
      scroll-behavior: auto !important;
    }
  }
`;
