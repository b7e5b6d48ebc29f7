// 004: redrive — every redrive call recorded (who, when, what, how many) with the intents it moved, and the
// attempt budget no longer capped at 50: a redrive adds a fresh budget on top of the attempts already made
// (max_attempts = attempts sent so far + the contract's maxAttempts), so attempt numbers simply continue.
export const m004Redrive = `
ALTER TABLE submission_intents DROP CONSTRAINT IF EXISTS submission_intents_max_attempts_check;
ALTER TABLE submission_intents DROP CONSTRAINT IF EXISTS ck_intents_max_attempts;
ALTER TABLE submission_intents ADD CONSTRAINT ck_intents_max_attempts CHECK (max_attempts >= 1);

CREATE TABLE IF NOT EXISTS submission_manager_redrives (
  redrive_id    uuid         PRIMARY KEY,
  requested_at  timestamptz  NOT NULL,
  requested_by  varchar(128) NOT NULL,
  reason        varchar(500) NULL,
  selector      text         NOT NULL,
  redriven      integer      NOT NULL
);
CREATE INDEX IF NOT EXISTS ix_redrives_requested ON submission_manager_redrives (requested_at);

CREATE TABLE IF NOT EXISTS submission_manager_redriven_intents (
  redrive_id    uuid         NOT NULL,
  intent_id     uuid         NOT NULL,
  attempts_before integer    NOT NULL,
  PRIMARY KEY (intent_id, redrive_id)
);
`;
