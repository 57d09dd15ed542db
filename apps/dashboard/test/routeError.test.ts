import { createElement } from 'react'
import { renderToStaticMarkup } from 'react-dom/server'
import { createStaticHandler, createStaticRouter, Outlet, StaticRouterProvider } from 'react-router'
import { describe, expect, it } from 'vitest'
import { describeRouteError, RouteError } from '../src/RouteError.tsx'

describe('describeRouteError', () => {
  it('says a page whose file could not be fetched needs a reload', () => {
    for (const message of [
      'Failed to fetch dynamically imported module: http://x/assets/Editor-abc.js',
      'error loading dynamically imported module: http://x/assets/Editor-abc.js',
      'Importing a module script failed.',
      'Unable to preload CSS for /assets/Editor-abc.css',
    ]) {
      const text = describeRouteError(new TypeError(message))
      expect(text.chunk).toBe(true)
      expect(text.message).toMatch(/updated since this tab opened, or the service cannot be reached/)
    }
  })

  it('quotes any other error', () => {
    expect(describeRouteError(new Error('x is undefined'))).toEqual({
      title: 'Something went wrong',
      message: 'This page failed to show: x is undefined. Reloading may help.',
      chunk: false,
    })
  })
})

describe('RouteError', () => {
  /** The markup of `path` in a route tree whose page's file fails to load as after a redeploy. */
  async function render(path: string): Promise<string> {
    const routes = [
      {
        errorElement: createElement(RouteError),
        children: [
          {
            path: '/',
            element: createElement(
              'div',
              null,
              createElement('nav', null, 'Main navigation'),
              createElement(Outlet),
            ),
            children: [
              {
                errorElement: createElement(RouteError, { framed: true }),
                children: [
                  {
                    path: 'page',
                    lazy: async () => {
                      throw new Error('Unable to preload CSS for /assets/Editor-abc.css')
                    },
                  },
                ],
              },
            ],
          },
        ],
      },
    ]
    const handler = createStaticHandler(routes)
    const context = await handler.query(new Request(`http://dashboard${path}`))
    if (context instanceof Response) throw new Error('unexpected redirect')
    const router = createStaticRouter(handler.dataRoutes, context)
    return renderToStaticMarkup(createElement(StaticRouterProvider, { router, context, hydrate: false }))
  }

  it('keeps the frame and offers a reload when a page cannot be fetched', async () => {
    const html = await render('/page')
    expect(html).toContain('Main navigation')
    expect(html).toContain('This page could not be loaded')
    expect(html).toContain('>Reload</button>')
    expect(html).not.toContain('Unexpected Application Error')
  })
})
