// The built-in routing policies by name (the CLI's --router), and the router
// a fleet's options ask for.

import { ApproximatePrefixRouter } from './approximate-prefix.js';
import { LeastLoadedRouter } from './least-loaded.js';
import { PrecisePrefixRouter } from './precise-prefix.js';
import { RoundRobinRouter } from './round-robin.js';
import type { Router } from './router.js';
import { SessionAffinityRouter } from './session-affinity.js';

export const ROUTER_POLICIES = ['round-robin', 'least-loaded', 'session-affinity', 'approximate-prefix', 'precise-prefix'] as const;
export type RouterPolicy = (typeof ROUTER_POLICIES)[number];

/** What the built-in routers are built from: the engines' geometry and the fleet's router options. */
export interface RouterContext {
  blockSize: number;
  /** Blocks per engine an approximate router remembers (all its ranks' blocks, padding excluded). */
  capacity: number;
  prefixWeight: number;
  loadWeight: number;
  affinityBlocks: number;
  /** The engines announce each copy of a cached key (vLLM engines): the precise router's index counts them. */
  countCopies?: boolean;
}

export function createRouter(policy: RouterPolicy, c: RouterContext): Router {
  const weights = { prefixWeight: c.prefixWeight, loadWeight: c.loadWeight };
  switch (policy) {
    case 'round-robin':
      return new RoundRobinRouter();
    case 'least-loaded':
      return new LeastLoadedRouter();
    case 'session-affinity':
      return new SessionAffinityRouter(c.affinityBlocks);
    case 'approximate-prefix':
      return new ApproximatePrefixRouter({ capacity: c.capacity, ...weights });
    case 'precise-prefix':
      return new PrecisePrefixRouter({ blockSize: c.blockSize, ...weights, ...(c.countCopies === true && { countCopies: true }) });
  }
}
