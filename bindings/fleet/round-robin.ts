// Round-robin: the j-th request routed (0-based) goes to engine j mod K,
// whatever the engines hold or carry. The baseline the others are measured against.

import type { FleetView, RouteRequest, Router } from './router.js';

export class RoundRobinRouter implements Router {
  readonly name = 'round-robin';
  private next = 0;

  route(_req: RouteRequest, fleet: FleetView): number {
    const e = this.next % fleet.engines;
    this.next = e + 1;
    return e;
  }
}
