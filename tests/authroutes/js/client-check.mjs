// Runs better-auth's own client (createAuthClient with usernameClient) against a running Tidings and
// prints what each call answered, as JSON, for tests/authroutes/test_better_auth_client.py to check.
//
// Node has no cookie jar, so the fetch below keeps the cookies the server sets and sends them back,
// with the Origin a browser on the service's own pages would send.
import { createAuthClient } from "better-auth/client";
import { usernameClient } from "better-auth/client/plugins";

const [baseURL, username, password] = process.argv.slice(2);
const origin = new URL(baseURL).origin;
const jar = new Map();

async function fetchWithCookies(input, init = {}) {
  const headers = new Headers(init.headers);
  if (jar.size > 0) {
    headers.set("cookie", [...jar].map(([name, value]) => `${name}=${value}`).join("; "));
  }
  headers.set("origin", origin);
  const response = await fetch(input, { ...init, headers });
  for (const line of response.headers.getSetCookie()) {
    const [pair, ...attributes] = line.split(";");
    const cut = pair.indexOf("=");
    const name = pair.slice(0, cut).trim();
    const value = pair.slice(cut + 1).trim();
    const expired = attributes.some((a) => /^\s*max-age=0\s*$/i.test(a)) || value === '""' || value === "";
    if (expired) jar.delete(name);
    else jar.set(name, value);
  }
  return response;
}

const client = createAuthClient({
  baseURL: `${baseURL}/api/auth`,
  plugins: [usernameClient()],
  fetchOptions: { customFetchImpl: fetchWithCookies },
});

function outcome(result) {
  const { data, error } = result;
  return {
    data: data ?? null,
    error: error ? { status: error.status, code: error.code ?? null, message: error.message ?? null } : null,
  };
}

const report = {};
report.usernameTaken = outcome(await client.isUsernameAvailable({ username: username.toUpperCase() }));
report.usernameFree = outcome(await client.isUsernameAvailable({ username: "free_name_42" }));
report.usernameTooShort = outcome(await client.isUsernameAvailable({ username: "ab" }));
report.signUp = outcome(
  await client.signUp.email({
    email: "someone.new@example.com",
    password: "a long enough password",
    name: "Someone New",
    username: "someone_new",
  }),
);
report.signInWrong = outcome(await client.signIn.username({ username, password: "not the password" }));
report.cookiesAfterWrongSignIn = [...jar.keys()];
report.signIn = outcome(await client.signIn.username({ username, password }));
report.cookiesAfterSignIn = [...jar.keys()];
report.session = outcome(await client.getSession());
report.updateUsername = outcome(await client.updateUser({ username: "renamed_staff" }));
report.updateName = outcome(await client.updateUser({ name: "Renamed By Client" }));
report.sessionAfterUpdate = outcome(await client.getSession());
report.signOut = outcome(await client.signOut());
report.sessionAfterSignOut = outcome(await client.getSession());
report.updateSignedOut = outcome(await client.updateUser({ name: "Nobody" }));

process.stdout.write(JSON.stringify(report));
