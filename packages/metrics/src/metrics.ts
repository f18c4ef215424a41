import { collectDefaultMetrics, Registry } from 'prom-client'
import {
  apiMetrics,
  deliveryMetrics,
  ingestMetrics,
  writerMetrics,
  type ApiMetrics,
  type DeliveryMetrics,
  type IngestMetrics,
  type WriterMetrics,
} from './areas.js'

export interface MetricsOptions {
  /** Node's process metrics (CPU, memory, heap, event-loop lag, GC); default true. */
  defaultMetrics?: boolean
  /** Labels on every series, e.g. `{ roles: 'writer' }`. */
  labels?: Record<string, string>
}

/**
 * One process's metrics: a registry and the recorders of each area, made on first use so that a
 * process exports only the families of the roles it runs, and roles sharing the process share them.
 */
export class Metrics {
  readonly registry = new Registry()
  private areas: {
    writer?: WriterMetrics
    ingest?: IngestMetrics
    api?: ApiMetrics
    delivery?: DeliveryMetrics
  } = {}

  constructor(options: MetricsOptions = {}) {
    if (options.labels) this.registry.setDefaultLabels(options.labels)
    if (options.defaultMetrics !== false) collectDefaultMetrics({ register: this.registry })
  }

  writer(): WriterMetrics {
    return (this.areas.writer ??= writerMetrics(this.registry))
  }

  ingest(): IngestMetrics {
    return (this.areas.ingest ??= ingestMetrics(this.registry))
  }

  api(): ApiMetrics {
    return (this.areas.api ??= apiMetrics(this.registry))
  }

  delivery(): DeliveryMetrics {
    return (this.areas.delivery ??= deliveryMetrics(this.registry))
  }

  /** The exposition text Prometheus scrapes. */
  text(): Promise<string> {
    return this.registry.metrics()
  }

  get contentType(): string {
    return this.registry.contentType
  }
}

export function createMetrics(options: MetricsOptions = {}): Metrics {
  return new Metrics(options)
}
