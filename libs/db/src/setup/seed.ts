import { generateSignedKey, hashKey, keyDisplayPrefix, newId, type Scope } from "@notify/core";
import { loadCredentialKeys } from "../directory/deployment-secrets.js";
import type { Database } from "../pool.js";
import type { DeviceToken } from "../schema/users.js";

export interface TemplateSeed {
  id: string;
  defaultLocale?: string;
  params: string[];
  variants: Array<{ channel: string; locale: string; subject: string | null; body: string }>;
}

/** Creates a template with version 1 when the id is free; returns whether it did. */
export async function seedTemplate(database: Database, template: TemplateSeed): Promise<boolean> {
  return database.sql.begin(async (tx) => {
    const created = await tx`
      insert into templates (id, default_locale, latest_version) values (${template.id}, ${template.defaultLocale ?? "en"}, 1)
      on conflict (id) do nothing returning id`;
    if (created.length === 0) return false;
    await tx`insert into template_versions (template_id, version, params) values (${template.id}, 1, ${tx.json(template.params)})`;
    for (const v of template.variants) {
      await tx`insert into template_variants (template_id, version, channel, locale, subject, body_template)
               values (${template.id}, 1, ${v.channel}, ${v.locale}, ${v.subject}, ${v.body})`;
    }
    return true;
  });
}

/** Issues an API key directly in the database (bootstrap and tests); returns the plaintext once. */
export async function seedApiKey(
  database: Database,
  input: { clientId: string; name: string; scopes: Scope[] },
): Promise<string> {
  const key = generateSignedKey(await loadCredentialKeys(database));
  await database.sql`insert into api_keys (id, client_id, name, prefix, key_hash, scopes)
    values (${newId()}, ${input.clientId}, ${input.name}, ${keyDisplayPrefix(key)}, ${hashKey(key)}, ${input.scopes})`;
  return key;
}

export async function seedContact(
  database: Database,
  contact: { userId: string; email?: string; phone?: string },
): Promise<void> {
  await database.sql`insert into user_contacts (user_id, email, phone) values (${contact.userId}, ${contact.email ?? null}, ${contact.phone ?? null})
    on conflict (user_id) do update set email = excluded.email, phone = excluded.phone, updated_at = now()`;
}

/** Sets a user's push subscriptions (the dev stack's sample user), replacing any it had. */
export async function seedDeviceTokens(database: Database, userId: string, tokens: DeviceToken[]): Promise<void> {
  await database.sql`insert into user_preferences (user_id, device_tokens)
    values (${userId}, ${database.sql.json(tokens as never)})
    on conflict (user_id) do update set device_tokens = excluded.device_tokens, updated_at = now()`;
}
