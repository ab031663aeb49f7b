import type { Db } from "../../db/client.ts";
import {
  deleteDestination,
  listDestinations,
  loadGuardrails,
  storeGuardrails,
  upsertDestination,
} from "../../db/observability_store.ts";
import type { Clock } from "../runtime/clock.ts";
import { type Guardrails, GUARDRAILS_OFF, GuardrailsSchema } from "../policy/guardrails.ts";
import type { Logger } from "../runtime/logger.ts";
import { type Destination, DestinationSchema } from "./destination_schema.ts";
import type { Exporter } from "./exporter.ts";

/**
 * Guardrails and destinations in force, kept in step with the database:
 * every change is validated whole, stored, then applied.
 */
export class ObservabilityState {
  guardrails: Guardrails = GUARDRAILS_OFF;
  destinations: Destination[] = [];

  constructor(
    private deps: { db: Db; clock: Clock; exporter: Exporter; log: Logger },
  ) {}

  /** Loads what is stored; a stored document that no longer validates is skipped and logged. */
  async load(): Promise<void> {
    const { db, log } = this.deps;
    const rails = GuardrailsSchema.safeParse((await loadGuardrails(db)) ?? {});
    if (rails.success) this.guardrails = rails.data;
    else log.event("guardrails.invalid_stored", { problems: rails.error.issues.length });
    this.destinations = (await listDestinations(db)).flatMap((raw) => {
      const parsed = DestinationSchema.safeParse(raw);
      if (!parsed.success) log.event("destination.invalid_stored", {});
      return parsed.success ? [parsed.data] : [];
    });
    this.deps.exporter.setDestinations(this.destinations);
  }

  async setGuardrails(rails: Guardrails): Promise<void> {
    await storeGuardrails(this.deps.db, rails, { now: this.deps.clock.now() });
    this.guardrails = rails;
  }

  async putDestination(destination: Destination): Promise<void> {
    await upsertDestination(this.deps.db, destination.id, {
      body: destination,
      now: this.deps.clock.now(),
    });
    const others = this.destinations.filter((d) => d.id !== destination.id);
    this.destinations = [...others, destination];
    this.deps.exporter.setDestinations(this.destinations);
  }

  async removeDestination(id: string): Promise<boolean> {
    const removed = await deleteDestination(this.deps.db, id);
    this.destinations = this.destinations.filter((d) => d.id !== id);
    this.deps.exporter.setDestinations(this.destinations);
    return removed;
  }
}
