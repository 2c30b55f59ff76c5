// What every page shares: who is signed in, which page shows, and what
// the lists have taught about tasks.
export const state = {
  session: null, // GET /console/session: owner_id, role, workload, csrf_token, alert_thresholds
  active: null, // the page shown
  listView: null, // the list a task was opened from, for "Back"
  ownerHints: new Map(), // task id -> owner id, from lists already seen
};

// defaultView is the first page for a role, or null when it has none.
export function defaultView(role) {
  return { client: 'tasks', support: 'support', admin: 'support', finance: 'finance' }[role] || null;
}
