// Least-loaded: the engine with the fewest requests decoding plus queued
// (requests routed earlier in the same step count), ties to the lowest index.

import { argmax, type FleetView, type RouteRequest, type Router } from './router.js';

export class LeastLoadedRouter implements Router {
  readonly name = 'least-loaded';

  route(_req: RouteRequest, fleet: FleetView): number {
    return argmax(fleet.engines, (e) => -fleet.load(e));
  }
}
