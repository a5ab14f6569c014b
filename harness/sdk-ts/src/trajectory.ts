/** Who and where: the envelope fields shared by every event of one trajectory. */
export interface Trajectory {
  readonly trajectory_id: string;
  readonly session_id: string;
  /** The client's own user id; ingest replaces it with a keyed pseudonym. */
  readonly user: string;
  readonly checkpoint_id: string;
  /** The A/B arm; "default" when absent. */
  readonly arm?: string;
}
