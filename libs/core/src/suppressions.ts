/**
 * The form an address is kept and compared in on the suppression list: an email address trimmed
 * and lower-cased (mailbox providers treat the local part case-insensitively in practice, and a
 * bounce report may spell it differently from the contact record), a phone number with
 * everything but its digits and a leading + dropped (carriers report E.164, with or without the
 * +). Null for an address that cannot be one of the channel's.
 */
export function suppressionAddress(channel: string, address: string): string | null {
  if (channel === "email") {
    const email = address.trim().toLowerCase();
    const at = email.lastIndexOf("@");
    return at > 0 && at < email.length - 1 && !/\s/.test(email) && email.length <= 320 ? email : null;
  }
  if (channel === "sms") {
    const digits = address.replace(/[\s().-]/g, "").replace(/^\+/, "");
    return /^[1-9]\d{6,14}$/.test(digits) ? `+${digits}` : null;
  }
  return null;
}
